#include "autoresume/health.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <pugixml.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "autoresume/text.hpp"

namespace ar::health {

namespace {

std::string text_of(const pugi::xml_node& node, const char* path) {
  return node.first_element_by_path(path).text().as_string();
}

// nvidia-smi prints "N/A" for counters a GPU does not have, and "ERR!" or
// "Unknown Error" where the driver cannot read the GPU.
bool unreadable(std::string_view value) {
  return value.find("ERR!") != std::string_view::npos ||
         value.find("Unknown Error") != std::string_view::npos ||
         value.find("GPU is lost") != std::string_view::npos;
}

unsigned long long count(std::string_view value) {
  unsigned long long n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  return ec == std::errc() ? n : 0;  // "N/A" and the like count as none
}

// What is wrong with one <gpu> element, if anything.
std::vector<std::string> gpu_problems(const pugi::xml_node& gpu) {
  const std::string id = gpu.attribute("id").as_string("?");
  std::vector<std::string> problems;
  // Any field the driver could not read: the GPU fell off the bus.
  for (const auto* field : {"product_name", "uuid", "pci/pci_bus_id", "temperature/gpu_temp",
                            "fb_memory_usage/total"}) {
    if (unreadable(text_of(gpu, field))) {
      problems.push_back("GPU " + id + " is not readable (fallen off the bus?)");
      return problems;
    }
  }
  if (text_of(gpu, "retired_pages/pending_retirement") == "Yes")
    problems.push_back("GPU " + id + " has a page retirement pending (reset it)");
  if (text_of(gpu, "remapped_rows/remapped_row_pending") == "Yes")
    problems.push_back("GPU " + id + " has a row remapping pending (reset it)");
  if (text_of(gpu, "remapped_rows/remapped_row_failure") == "Yes")
    problems.push_back("GPU " + id + " failed to remap a row");
  // Uncorrectable ECC errors since the driver loaded, by the names the
  // driver versions use.
  unsigned long long uncorrectable = 0;
  for (const auto* field :
       {"ecc_errors/volatile/double_bit/total", "ecc_errors/volatile/dram_uncorrectable",
        "ecc_errors/volatile/sram_uncorrectable", "ecc_errors/volatile/sram_uncorrectable_parity",
        "ecc_errors/volatile/sram_uncorrectable_secded"})
    uncorrectable += count(text_of(gpu, field));
  if (uncorrectable > 0)
    problems.push_back("GPU " + id + " has " + std::to_string(uncorrectable) +
                       " uncorrectable ECC errors");
  return problems;
}

}  // namespace

std::string_view to_string(Status status) {
  switch (status) {
    case Status::pass:
      return "pass";
    case Status::fail:
      return "fail";
    case Status::not_applicable:
      return "not applicable";
  }
  return "?";
}

std::optional<Result> not_applicable(std::string_view check, unsigned expected) {
  if (expected > 0 || check == "cpu" || check == "disk") return std::nullopt;
  const std::string_view hardware = check == "neuron" ? "Neuron devices"
                                    : check == "efa"  ? "EFA devices"
                                                      : "GPUs";
  return Result{std::string(check), Status::not_applicable,
                "no " + std::string(hardware) + " configured for this node"};
}

std::string node_reason(const Result& result, Action action) {
  std::string reason = action == Action::replace ? "Action:Replace " : "Action:Drain ";
  reason.append(result.check).append(": ").append(result.detail);
  if (reason.size() > kMaxReason) {
    reason.resize(kMaxReason - 3);
    reason += "...";
  }
  return reason;
}

Result check_nvidia_smi(std::string_view xml, unsigned expected_gpus) {
  if (auto skip = not_applicable("gpu", expected_gpus)) return *skip;
  Result result{"gpu", Status::pass, ""};
  pugi::xml_document doc;
  const auto parsed = doc.load_buffer(xml.data(), xml.size());
  const auto log = doc.child("nvidia_smi_log");
  if (!parsed || !log) {
    result.status = Status::fail;
    result.detail =
        parsed ? std::string("nvidia-smi printed no <nvidia_smi_log>")
               : std::string("nvidia-smi's output is not XML (") + parsed.description() + ")";
    return result;
  }
  std::vector<std::string> problems;
  unsigned gpus = 0;
  for (const auto& gpu : log.children("gpu")) {
    ++gpus;
    for (auto& problem : gpu_problems(gpu)) problems.push_back(std::move(problem));
  }
  if (gpus < expected_gpus)
    problems.insert(problems.begin(), std::to_string(gpus) + " GPUs visible, " +
                                          std::to_string(expected_gpus) + " configured");
  const std::string driver = text_of(log, "driver_version");
  if (!problems.empty()) {
    result.status = Status::fail;
    result.detail = ar::join(problems, "; ");
    return result;
  }
  result.detail = std::to_string(gpus) + " GPUs healthy (" + text_of(log, "gpu/product_name") +
                  ", driver " + driver + ")";
  return result;
}

std::optional<double> cpu_ops_per_second(std::string_view output) {
  // stress-ng: metrc: [PID] cpu  OPS  REAL  USR  SYS  OPS/S(real)  OPS/S(usr+sys)
  std::size_t start = 0;
  while (start < output.size()) {
    const auto end = std::min(output.find('\n', start), output.size());
    const auto line = output.substr(start, end - start);
    start = end + 1;
    const auto tag = line.find("metrc: [");
    if (tag == std::string_view::npos) continue;
    const auto close = line.find(']', tag);
    if (close == std::string_view::npos) continue;
    std::vector<std::string_view> words;
    std::size_t at = close + 1;
    while (at < line.size()) {
      const auto from = line.find_first_not_of(' ', at);
      if (from == std::string_view::npos) break;
      const auto to = std::min(line.find(' ', from), line.size());
      words.push_back(line.substr(from, to - from));
      at = to;
    }
    if (words.size() < 7 || words[0] != "cpu") continue;
    double rate = 0;
    const auto [ptr, ec] =
        std::from_chars(words[5].data(), words[5].data() + words[5].size(), rate);
    // A throughput is a finite count of ops: "nan" would compare false
    // against any baseline and pass.
    if (ec == std::errc() && ptr == words[5].data() + words[5].size() && std::isfinite(rate) &&
        rate >= 0)
      return rate;
  }
  return std::nullopt;
}

Result check_cpu_stress(std::string_view output, int exit_status, std::optional<double> baseline,
                        double min_fraction) {
  Result result{"cpu", Status::fail, ""};
  // stress-ng says "fail:" (or "error:") for what went wrong, e.g. a
  // verification error of a stressor.
  std::size_t start = 0;
  while (start < output.size()) {
    const auto end = std::min(output.find('\n', start), output.size());
    const auto line = output.substr(start, end - start);
    start = end + 1;
    if (line.find(" fail: ") != std::string_view::npos ||
        line.find(" error: ") != std::string_view::npos) {
      result.detail = "stress-ng reported: " + std::string(line);
      return result;
    }
  }
  if (exit_status != 0) {
    result.detail = "stress-ng exited " + std::to_string(exit_status);
    return result;
  }
  const auto rate = cpu_ops_per_second(output);
  if (!rate) {
    result.detail = "no cpu metrics in stress-ng's output";
    return result;
  }
  char text[128];
  if (baseline && *baseline > 0 && *rate < min_fraction * *baseline) {
    std::snprintf(text, sizeof text,
                  "cpu throughput %.0f bogo ops/s is below %.0f%% of this node's baseline %.0f",
                  *rate, min_fraction * 100, *baseline);
    result.detail = text;
    return result;
  }
  result.status = Status::pass;
  if (baseline)
    std::snprintf(text, sizeof text, "cpu %.0f bogo ops/s (baseline %.0f)", *rate, *baseline);
  else
    std::snprintf(text, sizeof text, "cpu %.0f bogo ops/s (no baseline recorded)", *rate);
  result.detail = text;
  return result;
}

unsigned gpu_count_from_gres(std::string_view gres) {
  unsigned total = 0;
  std::size_t start = 0;
  while (start < gres.size()) {
    // Entries are comma-separated, but a socket list "(S:0,1)" has commas too.
    std::size_t end = start;
    int depth = 0;
    for (; end < gres.size() && (gres[end] != ',' || depth > 0); ++end)
      depth += gres[end] == '(' ? 1 : gres[end] == ')' ? -1 : 0;
    auto entry = gres.substr(start, end - start);
    start = end + 1;
    entry = entry.substr(0, entry.find('('));
    if (!entry.starts_with("gpu")) continue;
    if (entry == "gpu") {
      ++total;  // a bare "gpu" means one
      continue;
    }
    if (entry[3] != ':') continue;  // e.g. "gpumem:..."
    const auto count = entry.substr(entry.rfind(':') + 1);
    unsigned n = 0;
    const auto [ptr, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
    if (ec != std::errc() || ptr != count.data() + count.size())
      throw std::invalid_argument("cannot read the GPU count of GRES entry '" + std::string(entry) +
                                  "'");
    total += n;
  }
  return total;
}

}  // namespace ar::health
