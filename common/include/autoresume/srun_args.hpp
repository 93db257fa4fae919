#pragma once
// srun's command line read as srun 22.05 reads it (GNU getopt_long with
// "+": options stop at the first word that is not one, or after "--"), so
// that a relaunch can rewrite srun's own options and never the program's.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ar {

// One of srun's options as given on its command line.
struct SrunOption {
  // The long name ("nodelist" for -w, --nodel or --nodelist), or empty for a
  // long option srun's own table lacks (another SPANK plugin's): read as one
  // without a value unless it holds "=", so that at worst the options after
  // it are taken for the program, never the program for an option's value.
  std::string name;
  char letter = 0;  // the short form it was given as, 0 for a long option
  std::optional<std::string> value;
  std::size_t word = 0;   // the index in argv of its first word
  std::size_t words = 1;  // 2 when its value is the next word
};

struct SrunCommandLine {
  std::vector<SrunOption> options;  // in order; short options of one word share it
  // The index of the first word that is not srun's: "--", the program, or
  // argv.size() when there is neither.
  std::size_t end = 0;
};

// Reads `argv` (argv[0] is srun itself). Never throws: srun accepted this
// command line before the plugin saw it.
SrunCommandLine parse_srun_argv(const std::vector<std::string>& argv);

// `argv` without the options that `drop` accepts, the program's words
// untouched. A dropped short option that shared its word with others leaves
// them, each in a word of its own ("-lw n1" without -w is "-l").
std::vector<std::string> without_srun_options(const std::vector<std::string>& argv,
                                              const SrunCommandLine& line,
                                              const std::function<bool(const SrunOption&)>& drop);

}  // namespace ar
