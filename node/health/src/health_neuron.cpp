#include "autoresume/health_neuron.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <ios>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "health_text.hpp"

namespace ar::health {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDeviceCounters[] = {"sram_ecc_uncorrected", "mem_ecc_uncorrected",
                                           "mem_ecc_repairable_uncorrected"};
constexpr const char* kCoreStatusCounters[] = {"hw_error", "hw_hbm_ue_error", "hw_nc_ue_error",
                                               "hw_dma_abort_error", "hw_repairable_hbm_ue_error"};

// The entries of `dir` named <prefix><number>, by number.
std::vector<std::pair<unsigned, std::string>> numbered(const fs::path& dir,
                                                       std::string_view prefix) {
  std::vector<std::pair<unsigned, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const auto digits = std::string_view(name).substr(prefix.size());
    if (digits.empty() || digits.size() > 5 ||
        !std::ranges::all_of(digits, [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    found.emplace_back(static_cast<unsigned>(text::count(digits).value_or(0)), name);
  }
  std::ranges::sort(found);
  return found;
}

// Reads one counter: a file with the count, or a counter directory whose
// "total" has it. Nothing if there is no such counter; a problem text if it
// cannot be read or holds no count.
struct Counter {
  std::optional<unsigned long long> value;
  std::string problem;
};
Counter read_counter(const fs::path& path) {
  std::error_code ec;
  auto file = path;
  if (fs::is_directory(path, ec)) file = path / "total";
  if (!fs::exists(file, ec)) return {};
  errno = 0;
  std::ifstream in(file);
  if (!in)
    return {std::nullopt, "cannot read " + file.string() +
                              (errno != 0 ? std::string(": ") + std::strerror(errno) : "")};
  // libstdc++ throws on a read error (EIO from a failing device's driver,
  // EISDIR): the counter cannot be read, which fails the check.
  std::string content;
  errno = 0;
  try {
    content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    in.setstate(std::ios_base::badbit);
  }
  if (in.bad())
    return {std::nullopt, "cannot read " + file.string() +
                              (errno != 0 ? std::string(": ") + std::strerror(errno) : "")};
  const auto value = text::count(content);
  if (!value)
    return {std::nullopt, "no count in " + file.string() + ": '" +
                              std::string(text::strip(content)).substr(0, 40) + "'"};
  return {value, ""};
}

void check_counter(const fs::path& path, const std::string& label, const char* name,
                   std::vector<std::string>& problems) {
  const auto counter = read_counter(path);
  if (!counter.problem.empty())
    problems.push_back(counter.problem);
  else if (counter.value && *counter.value > 0)
    problems.push_back(label + " " + name + "=" + std::to_string(*counter.value));
}

}  // namespace

Result check_neuron_sysfs(const fs::path& root, unsigned expected_devices) {
  if (auto skip = not_applicable("neuron", expected_devices)) return *skip;
  Result result{"neuron", Status::fail, ""};
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    result.detail = "no Neuron driver tree at " + root.string() +
                    (ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")"
                                                                      : " (driver not loaded?)");
    return result;
  }
  if (fs::directory_iterator it(root, ec); ec) {
    result.detail = "cannot list " + root.string() + ": " + ec.message();
    return result;
  }
  const auto devices = numbered(root, "neuron");
  std::vector<std::string> problems;
  if (devices.size() < expected_devices)
    problems.push_back(std::to_string(devices.size()) + " Neuron devices in " + root.string() +
                       ", " + std::to_string(expected_devices) + " configured");
  std::size_t cores = 0;
  for (const auto& [number, device] : devices) {
    const auto dir = root / device;
    for (const auto* counter : kDeviceCounters)
      check_counter(dir / "stats" / "hardware" / counter, device, counter, problems);
    for (const auto& [core_number, core] : numbered(dir, "neuron_core")) {
      ++cores;
      const auto label = device + "/" + core;
      for (const auto* counter : kCoreStatusCounters)
        check_counter(dir / core / "stats" / "status" / counter, label, counter, problems);
      check_counter(dir / core / "stats" / "other_info" / "reset_fail_count", label,
                    "reset_fail_count", problems);
    }
  }
  if (!problems.empty()) {
    result.detail = ar::join(problems, "; ");
    return result;
  }
  result.status = Status::pass;
  result.detail = std::to_string(devices.size()) + " Neuron devices healthy (" +
                  std::to_string(cores) + " NeuronCores)";
  return result;
}

}  // namespace ar::health
