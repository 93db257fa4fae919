// The neuron check's reader of the Neuron driver's sysfs tree
// (ar::health::check_neuron_sysfs) on a tree built from the input, in the
// form of the unit tests' fixtures (test/unit/fixtures/neuron): one
// "path:content" line per file, at most 64 files of relative paths without
// "." or ".." components. Any tree must give a verdict with a detail,
// never a crash or an exception.

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "autoresume/health_neuron.hpp"
#include "fuzz.hpp"

namespace {

namespace fs = std::filesystem;

// A temporary directory of this process, made once.
const fs::path& scratch() {
  static const fs::path dir = [] {
    std::string pattern = (fs::temp_directory_path() / "ar-fuzz-neuron.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ar::fuzz::finding("cannot make a directory");
    return fs::path(pattern);
  }();
  return dir;
}

// A path the tree may hold: relative, of plain names.
bool plain(const fs::path& path) {
  if (path.empty() || path.is_absolute()) return false;
  for (const auto& part : path)
    if (part.empty() || part == "." || part == "..") return false;
  return true;
}

// Writes the input's files under `root`; false if one cannot be (e.g. a
// file where a directory is needed): not a tree sysfs can have.
bool build(const fs::path& root, std::string_view input) {
  int files = 0;
  for (const auto& line : ar::fuzz::split(input, '\n')) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const fs::path path = line.substr(0, colon);
    if (!plain(path) || ++files > 64) return false;
    std::error_code ec;
    fs::create_directories((root / path).parent_path(), ec);
    if (ec) return false;
    std::ofstream out(root / path);
    if (!(out << line.substr(colon + 1) << "\n")) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto root = scratch() / "tree";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directory(root, ec);
  if (!build(root, ar::fuzz::text(data, size))) return 0;
  for (const unsigned expected : {1U, 2U}) {
    const auto result = ar::health::check_neuron_sysfs(root, expected);
    if (result.check != "neuron" || result.detail.empty())
      ar::fuzz::finding("no verdict: " + result.check + " " + result.detail);
  }
  return 0;
}
