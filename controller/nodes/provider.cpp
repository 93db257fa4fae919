#include "nodes/provider.hpp"

namespace ar {

namespace {

std::string substitute(std::string word, const std::string& node) {
  for (auto at = word.find("{node}"); at != std::string::npos; at = word.find("{node}", at))
    word.replace(at, 6, node), at += node.size();
  return word;
}

}  // namespace

std::string output_tail(const std::string& output) {
  constexpr std::size_t kKeep = 2000;
  return output.size() <= kKeep ? output : "..." + output.substr(output.size() - kKeep);
}

std::string run_restart_command(CommandRunner& runner, const std::vector<std::string>& command,
                                const std::string& node, std::chrono::milliseconds timeout) {
  std::vector<std::string> words;
  for (const auto& word : command) words.push_back(substitute(word, node));
  const auto result = runner.run(words, timeout);
  if (result.status == 0) return "";
  const auto how =
      !result.error.empty() ? result.error : words[0] + " exited " + std::to_string(result.status);
  return how + "; output: " + output_tail(result.output);
}

std::string replace_node(const DaemonConfig& config, CommandRunner& runner,
                         const std::string& node) {
  switch (config.provider) {
    case ProviderKind::local:
      if (config.local_restart_command.empty())
        return "provider=local has no local_restart_command";
      return run_restart_command(runner, config.local_restart_command, node,
                                 config.provider_timeout);
    case ProviderKind::command:
      return run_restart_command(runner, {config.provider_command.string(), "replace", "{node}"},
                                 node, config.provider_timeout);
    case ProviderKind::spares:
      // The failed node is replaced in the background, by the site's
      // command if there is one, else by the local restart.
      if (!config.provider_command.empty())
        return run_restart_command(runner, {config.provider_command.string(), "replace", "{node}"},
                                   node, config.provider_timeout);
      if (config.local_restart_command.empty())
        return "provider=spares has neither provider_command nor local_restart_command";
      return run_restart_command(runner, config.local_restart_command, node,
                                 config.provider_timeout);
  }
  return "unknown provider";
}

}  // namespace ar
