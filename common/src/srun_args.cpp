#include "autoresume/srun_args.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "autoresume/option.hpp"

namespace ar {

namespace {

enum class Arg { none, required, optional };

struct Entry {
  std::string_view name;
  Arg arg;
  char letter;          // 0: long only
  std::string_view id;  // getopt's val: entries with the same one are one option
};

constexpr Arg kNone = Arg::none;
constexpr Arg kRequired = Arg::required;
constexpr Arg kOptional = Arg::optional;

// srun 22.05's options: the entries of Slurm's src/common/slurm_opt.c
// common_options that srun takes (set_func or set_func_srun), with their
// has_arg, short letter and val, plus this plugin's own SPANK option.
// srun's short option string is built from the same entries.
constexpr auto kOptions = std::to_array<Entry>({
    {"accel-bind", kRequired, 0, "ACCEL_BIND"},
    {"account", kRequired, 'A', "A"},
    {"acctg-freq", kRequired, 0, "ACCTG_FREQ"},
    {kOptionName, kRequired, 0, "SPANK_AUTO_RESUME"},  // has_arg 1 (spank/plugin.cpp)
    {kMinNodesOptionName, kRequired, 0, "SPANK_AUTO_RESUME_MIN_NODES"},
    {kSparesOptionName, kRequired, 0, "SPANK_AUTO_RESUME_SPARES"},
    {"bb", kRequired, 0, "BURST_BUFFER_SPEC"},
    {"bbf", kRequired, 0, "BURST_BUFFER_FILE"},
    {"bcast", kOptional, 0, "BCAST"},
    {"bcast-exclude", kRequired, 0, "BCAST_EXCLUDE"},
    {"begin", kRequired, 'b', "b"},
    {"chdir", kRequired, 'D', "D"},
    {"cluster", kRequired, 0, "CLUSTER"},
    {"cluster-constraint", kRequired, 0, "CLUSTER_CONSTRAINT"},
    {"clusters", kRequired, 'M', "M"},
    {"comment", kRequired, 0, "COMMENT"},
    {"compress", kOptional, 0, "COMPRESS"},
    {"constraint", kRequired, 'C', "C"},
    {"container", kRequired, 0, "CONTAINER"},
    {"context", kRequired, 0, "CONTEXT"},
    {"contiguous", kNone, 0, "CONTIGUOUS"},
    {"core-spec", kRequired, 'S', "S"},
    {"cores-per-socket", kRequired, 0, "CORESPERSOCKET"},
    {"cpu-bind", kRequired, 0, "CPU_BIND"},
    {"cpu-freq", kRequired, 0, "CPU_FREQ"},
    {"cpu_bind", kRequired, 0, "CPU_BIND"},
    {"cpus-per-gpu", kRequired, 0, "CPUS_PER_GPU"},
    {"cpus-per-task", kRequired, 'c', "c"},
    {"deadline", kRequired, 0, "DEADLINE"},
    {"debugger-test", kNone, 0, "DEBUGGER_TEST"},
    {"delay-boot", kRequired, 0, "DELAY_BOOT"},
    {"dependency", kRequired, 'd', "d"},
    {"disable-status", kNone, 'X', "X"},
    {"distribution", kRequired, 'm', "m"},
    {"epilog", kRequired, 0, "EPILOG"},
    {"error", kRequired, 'e', "e"},
    {"exact", kNone, 0, "EXACT"},
    {"exclude", kRequired, 'x', "x"},
    {"exclusive", kOptional, 0, "EXCLUSIVE"},
    {"export", kRequired, 0, "EXPORT"},
    {"extra-node-info", kRequired, 'B', "B"},
    {"gid", kRequired, 0, "GID"},
    {"gpu-bind", kRequired, 0, "GPU_BIND"},
    {"gpu-freq", kRequired, 0, "GPU_FREQ"},
    {"gpus", kRequired, 'G', "G"},
    {"gpus-per-node", kRequired, 0, "GPUS_PER_NODE"},
    {"gpus-per-socket", kRequired, 0, "GPUS_PER_SOCKET"},
    {"gpus-per-task", kRequired, 0, "GPUS_PER_TASK"},
    {"gres", kRequired, 0, "GRES"},
    {"gres-flags", kRequired, 0, "GRES_FLAGS"},
    {"help", kNone, 'h', "h"},
    {"het-group", kRequired, 0, "HET_GROUP"},
    {"hint", kRequired, 0, "HINT"},
    {"hold", kNone, 'H', "H"},
    {"immediate", kOptional, 'I', "I"},
    {"input", kRequired, 'i', "i"},
    {"interactive", kNone, 0, "INTERACTIVE"},
    {"job-name", kRequired, 'J', "J"},
    {"jobid", kRequired, 0, "JOBID"},
    {"kill-on-bad-exit", kOptional, 'K', "K"},
    {"label", kNone, 'l', "l"},
    {"licenses", kRequired, 'L', "L"},
    {"mail-type", kRequired, 0, "MAIL_TYPE"},
    {"mail-user", kRequired, 0, "MAIL_USER"},
    {"mcs-label", kRequired, 0, "MCS_LABEL"},
    {"mem", kRequired, 0, "MEM"},
    {"mem-bind", kRequired, 0, "MEM_BIND"},
    {"mem-per-cpu", kRequired, 0, "MEM_PER_CPU"},
    {"mem-per-gpu", kRequired, 0, "MEM_PER_GPU"},
    {"mincpus", kRequired, 0, "MINCPUS"},
    {"mpi", kRequired, 0, "MPI"},
    {"msg-timeout", kRequired, 0, "MSG_TIMEOUT"},
    {"multi-prog", kNone, 0, "MULTI"},
    {"network", kRequired, 0, "NETWORK"},
    {"nice", kOptional, 0, "NICE"},
    {"no-allocate", kNone, 'Z', "Z"},
    {"no-kill", kOptional, 'k', "k"},
    {"nodefile", kRequired, 'F', "F"},
    {"nodelist", kRequired, 'w', "w"},
    {"nodes", kRequired, 'N', "N"},
    {"ntasks", kRequired, 'n', "n"},
    {"ntasks-per-core", kRequired, 0, "NTASKSPERCORE"},
    {"ntasks-per-gpu", kRequired, 0, "NTASKSPERGPU"},
    {"ntasks-per-node", kRequired, 0, "NTASKSPERNODE"},
    {"ntasks-per-socket", kRequired, 0, "NTASKSPERSOCKET"},
    {"ntasks-per-tres", kRequired, 0, "NTASKSPERTRES"},
    {"open-mode", kRequired, 0, "OPEN_MODE"},
    {"output", kRequired, 'o', "o"},
    {"overcommit", kNone, 'O', "O"},
    {"overlap", kOptional, 0, "OVERLAP"},
    {"oversubscribe", kNone, 's', "s"},
    {"pack-group", kRequired, 0, "HET_GROUP"},
    {"partition", kRequired, 'p', "p"},
    {"power", kRequired, 0, "POWER"},
    {"prefer", kRequired, 0, "PREFER"},
    {"preserve-env", kNone, 'E', "E"},
    {"priority", kRequired, 0, "PRIORITY"},
    {"profile", kRequired, 0, "PROFILE"},
    {"prolog", kRequired, 0, "PROLOG"},
    {"propagate", kOptional, 0, "PROPAGATE"},
    {"pty", kNone, 0, "PTY"},
    {"qos", kRequired, 'q', "q"},
    {"quiet", kNone, 'Q', "Q"},
    {"quit-on-interrupt", kNone, 0, "QUIT_ON_INTR"},
    {"reboot", kNone, 0, "REBOOT"},
    {"relative", kRequired, 'r', "r"},
    {"reservation", kRequired, 0, "RESERVATION"},
    {"resv-ports", kOptional, 0, "RESV_PORTS"},
    {"send-libs", kOptional, 0, "SEND_LIBS"},
    {"signal", kRequired, 0, "SIGNAL"},
    {"slurmd-debug", kRequired, 0, "SLURMD_DEBUG"},
    {"sockets-per-node", kRequired, 0, "SOCKETSPERNODE"},
    {"spread-job", kNone, 0, "SPREAD_JOB"},
    {"switches", kRequired, 0, "SWITCHES"},
    {"task-epilog", kRequired, 0, "TASK_EPILOG"},
    {"task-prolog", kRequired, 0, "TASK_PROLOG"},
    {"tasks-per-node", kRequired, 0, "NTASKSPERNODE"},
    {"test-only", kNone, 0, "TEST_ONLY"},
    {"thread-spec", kRequired, 0, "THREAD_SPEC"},
    {"threads", kRequired, 'T', "T"},
    {"threads-per-core", kRequired, 0, "THREADSPERCORE"},
    {"time", kRequired, 't', "t"},
    {"time-min", kRequired, 0, "TIME_MIN"},
    {"tmp", kRequired, 0, "TMP"},
    {"uid", kRequired, 0, "UID"},
    {"unbuffered", kNone, 'u', "u"},
    {"usage", kNone, 0, "USAGE"},
    {"use-min-nodes", kNone, 0, "USE_MIN_NODES"},
    {"verbose", kNone, 'v', "v"},
    {"version", kNone, 'V', "V"},
    {"wait", kRequired, 'W', "W"},
    {"wckey", kRequired, 0, "WCKEY"},
    {"whole", kNone, 0, "WHOLE"},
    {"x11", kOptional, 0, "X11"},
});

const Entry* by_letter(char letter) {
  for (const auto& entry : kOptions)
    if (entry.letter != 0 && entry.letter == letter) return &entry;
  return nullptr;
}

// As getopt_long matches a long name: exactly, or as the prefix of names
// that are all one option (cpu-bind and cpu_bind); nothing when unknown or
// ambiguous (srun would have refused it: another plugin's option).
const Entry* by_name(std::string_view name) {
  for (const auto& entry : kOptions)
    if (entry.name == name) return &entry;
  const Entry* found = nullptr;
  for (const auto& entry : kOptions) {
    if (!entry.name.starts_with(name)) continue;
    if (found != nullptr && (found->id != entry.id || found->arg != entry.arg)) return nullptr;
    if (found == nullptr) found = &entry;
  }
  return found;
}

// Reads the long option at argv[i] ("--name", "--name=value", or "--name"
// and its value in the next word).
SrunOption long_option(const std::vector<std::string>& argv, std::size_t i) {
  const std::string_view word = std::string_view(argv[i]).substr(2);
  const auto equals = word.find('=');
  SrunOption option;
  option.word = i;
  const auto* entry = by_name(word.substr(0, equals));
  if (equals != std::string_view::npos) option.value = std::string(word.substr(equals + 1));
  if (entry == nullptr) return option;  // name stays empty
  option.name = std::string(entry->name);
  if (entry->arg == Arg::required && !option.value && i + 1 < argv.size()) {
    option.value = argv[i + 1];
    option.words = 2;
  }
  return option;
}

// Reads the short options of argv[i] ("-l", "-lN2", "-N" and its value in
// the next word) into `out`.
void short_options(const std::vector<std::string>& argv, std::size_t i,
                   std::vector<SrunOption>& out) {
  const std::string& word = argv[i];
  for (std::size_t at = 1; at < word.size(); ++at) {
    SrunOption option;
    option.word = i;
    option.letter = word[at];
    const auto* entry = by_letter(word[at]);
    if (entry != nullptr) option.name = std::string(entry->name);
    const bool takes = entry != nullptr && entry->arg != Arg::none;
    if (takes && at + 1 < word.size()) {
      option.value = word.substr(at + 1);
    } else if (takes && entry->arg == Arg::required && i + 1 < argv.size()) {
      option.value = argv[i + 1];
      option.words = 2;
    }
    out.push_back(std::move(option));
    if (takes) return;  // the rest of the word was its value
  }
}

// How one kept option of a word it shared is written on its own.
std::vector<std::string> own_words(const SrunOption& option) {
  const std::string flag = std::string("-") + option.letter;
  if (!option.value) return {flag};
  if (option.value->empty()) return {flag, ""};  // "-J" "": a required value
  return {flag + *option.value};
}

}  // namespace

SrunCommandLine parse_srun_argv(const std::vector<std::string>& argv) {
  SrunCommandLine line;
  std::size_t i = 1;
  while (i < argv.size()) {
    const std::string& word = argv[i];
    if (word == "--" || word.size() < 2 || word[0] != '-') break;
    if (word.starts_with("--")) {
      line.options.push_back(long_option(argv, i));
    } else {
      short_options(argv, i, line.options);
    }
    const auto& last = line.options.back();
    i = last.word + last.words;
  }
  line.end = std::min(i, argv.size());
  return line;
}

std::vector<std::string> without_srun_options(const std::vector<std::string>& argv,
                                              const SrunCommandLine& line,
                                              const std::function<bool(const SrunOption&)>& drop) {
  std::vector<std::string> out;
  if (argv.empty()) return out;
  out.push_back(argv.front());
  const auto& options = line.options;
  for (std::size_t i = 0; i < options.size();) {
    // options[i, j) share their first word.
    std::size_t j = i;
    bool dropped = false;
    while (j < options.size() && options[j].word == options[i].word)
      dropped = drop(options[j++]) || dropped;
    const auto& last = options[j - 1];
    if (!dropped) {
      out.insert(out.end(), argv.begin() + static_cast<std::ptrdiff_t>(options[i].word),
                 argv.begin() + static_cast<std::ptrdiff_t>(last.word + last.words));
    } else if (j - i > 1) {
      for (std::size_t k = i; k < j; ++k)
        if (!drop(options[k]))
          for (auto& word : own_words(options[k])) out.push_back(std::move(word));
    }
    i = j;
  }
  out.insert(out.end(), argv.begin() + static_cast<std::ptrdiff_t>(line.end), argv.end());
  return out;
}

}  // namespace ar
