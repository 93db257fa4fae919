#pragma once
// Instances for continuous provisioning: what the provider program says
// about them (its `key=value` output, contract v2 in docs/provisioning.md),
// and their metering (one record per instance; billable from started to
// terminated).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ar {

// What `PROGRAM create GROUP NODE TOKEN` printed besides free text: lines
// that are exactly `instance_id=ID`, `node_addr=ADDRESS` or
// `node_hostname=NAME`.
struct CreateOutput {
  std::string instance_id;
  std::string node_addr;
  std::string node_hostname;
};

// Parses a create's output. Throws std::invalid_argument naming a bad
// value (an instance id beyond [A-Za-z0-9._:/@-]{1,128}, an address or
// host name beyond [A-Za-z0-9.:-]{1,253}) or a key given twice.
CreateOutput parse_create_output(std::string_view output);

// One instance as `PROGRAM list` prints it: a line `token=T instance_id=I`
// (more `key=value` pairs, such as node=, are allowed and ignored).
struct ListedInstance {
  std::string token;
  std::string instance_id;
  bool operator==(const ListedInstance&) const = default;
};

// Parses a list's output: every non-blank line must hold token= and
// instance_id=; otherwise std::invalid_argument naming the line, so that a
// garbled list terminates nothing. At most kMaxListed instances.
inline constexpr std::size_t kMaxListed = 100'000;
std::vector<ListedInstance> parse_list_output(std::string_view output);

// A token's parts: GROUP:NODE:ATTEMPT (provision.hpp makes them).
struct TokenParts {
  std::string group;
  std::string node;
  unsigned attempt = 0;
};
std::optional<TokenParts> split_token(std::string_view token);

// The metering record of one instance. Times are Unix seconds; 0: not yet.
struct InstanceRecord {
  std::string token;  // GROUP:NODE:ATTEMPT
  std::string group;
  std::string node;
  std::string instance_id;
  std::uint64_t operation = 0;
  std::int64_t requested = 0;   // the create was asked for
  std::int64_t started = 0;     // the provider said it exists (create exited 0, or 65)
  std::int64_t in_service = 0;  // released for jobs
  std::int64_t terminated = 0;  // gone (or the create failed: no instance)
  std::string end_reason;
};

// Seconds of `record` billable within [since, now]: from started to
// terminated (or now), whatever the group's or the cluster's state.
std::int64_t billable_seconds(const InstanceRecord& record, std::int64_t since, std::int64_t now);

struct GroupUsage {
  std::string group;
  std::size_t instances = 0;  // records with billable time in the window
  double instance_hours = 0;
};

// Per-group instance-hours within [since, now], groups in name order.
std::vector<GroupUsage> usage(const std::vector<InstanceRecord>& records, std::int64_t since,
                              std::int64_t now);

}  // namespace ar
