#include "autoresume/health_efa.hpp"

#include <algorithm>

#include "health_text.hpp"

namespace ar::health {

std::vector<std::string> efa_devices(std::string_view fi_info_output) {
  std::vector<std::string> domains;
  std::string provider;
  std::string domain;
  auto done = [&](std::string_view type) {
    if (provider == "efa" && type == "FI_EP_RDM" && !domain.empty() &&
        std::ranges::find(domains, domain) == domains.end())
      domains.push_back(domain);
  };
  for (const auto line : text::lines(fi_info_output)) {
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const auto key = line.substr(0, colon);
    const auto value = text::strip(line.substr(colon + 1));
    if (key == "provider") {
      provider = std::string(value);
      domain.clear();
    } else if (key == "domain") {
      domain = std::string(value);
    } else if (key == "type") {
      done(value);
    }
  }
  return domains;
}

Result check_efa(const ToolRun& fi_info, unsigned expected_devices,
                 const std::vector<EfaPingpong>& pingpongs) {
  if (auto skip = not_applicable("efa", expected_devices)) return *skip;
  Result result{"efa", Status::fail, ""};
  if (!fi_info.error.empty() || fi_info.status != 0) {
    result.detail = text::tool_failure(fi_info, "fi_info -p efa");
    return result;
  }
  const auto domains = efa_devices(fi_info.output);
  if (domains.size() < expected_devices) {
    result.detail = std::to_string(domains.size()) + " EFA devices listed by fi_info" +
                    (domains.empty() ? "" : " (" + ar::join(domains, ", ") + ")") + ", " +
                    std::to_string(expected_devices) + " configured";
    return result;
  }
  std::vector<std::string> problems;
  for (const auto& pingpong : pingpongs) {
    // The client's end says most (the server may only have been killed).
    for (const auto* side : {&pingpong.client, &pingpong.server}) {
      if (side->error.empty() && side->status == 0) continue;
      const std::string what =
          side == &pingpong.client ? "fi_pingpong client" : "fi_pingpong server";
      problems.push_back(
          "EFA device " + pingpong.domain + ": " +
          (side->error.empty() ? text::tool_failure(*side, what) : what + ": " + side->error));
      break;
    }
  }
  if (problems.empty())
    for (const auto& domain : domains)
      if (std::ranges::none_of(pingpongs, [&](const auto& p) { return p.domain == domain; }))
        problems.push_back("EFA device " + domain + " was not tested (no fi_pingpong run)");
  if (!problems.empty()) {
    result.detail = ar::join(problems, "; ");
    return result;
  }
  result.status = Status::pass;
  result.detail = std::to_string(domains.size()) + " EFA devices passed fi_pingpong (" +
                  ar::join(domains, ", ") + ")";
  return result;
}

}  // namespace ar::health
