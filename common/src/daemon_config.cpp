#include "autoresume/daemon_config.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "autoresume/keyvalue.hpp"

namespace ar {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::ranges::transform(out, out.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

ProviderKind parse_provider(std::string_view value) {
  if (value == "local") return ProviderKind::local;
  throw ConfigError("unknown provider '" + std::string(value) + "' (available: local)");
}

void apply(DaemonConfig& config, const std::string& key, const std::string& value) {
  if (key == "listen") {
    config.listen = parse_endpoint(key, value);
  } else if (key == "state_dir") {
    config.state_dir = parse_absolute_path(key, value);
  } else if (key == "provider") {
    config.provider = parse_provider(value);
  } else if (key == "max_attempts") {
    config.max_attempts = static_cast<unsigned>(parse_uint(key, value, 0, 100));
  } else if (key == "munge_socket") {
    config.munge_socket = parse_absolute_path(key, value);
  } else {
    throw ConfigError("unknown key '" + key +
                      "' (known: listen, state_dir, provider, max_attempts, munge_socket)");
  }
}

}  // namespace

std::string_view to_string(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::local:
      return "local";
  }
  return "?";
}

DaemonConfig parse_daemon_config(std::string_view text, std::string_view origin) {
  DaemonConfig config;
  std::set<std::string> seen;
  std::size_t line_no = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    auto line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    try {
      auto [key, value] = split_key_value(line);
      key = lower(key);
      if (!seen.insert(key).second) throw ConfigError("key '" + key + "' is set twice");
      apply(config, key, value);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string(origin) + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  if (!seen.contains("provider"))
    throw ConfigError(std::string(origin) +
                      ": provider is not set: name it explicitly (provider=local is for "
                      "development and tests)");
  return config;
}

DaemonConfig load_daemon_config(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError("cannot read configuration file '" + file.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_daemon_config(text.str(), file.string());
}

std::string render(const DaemonConfig& config) {
  std::ostringstream out;
  out << "listen=" << config.listen.str() << "\n"
      << "state_dir=" << config.state_dir.string() << "\n"
      << "provider=" << to_string(config.provider) << "\n"
      << "max_attempts=" << config.max_attempts << "\n";
  if (!config.munge_socket.empty()) out << "munge_socket=" << config.munge_socket << "\n";
  return out.str();
}

}  // namespace ar
