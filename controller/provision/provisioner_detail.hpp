#pragma once
// What several of the provisioner's sources share (provisioner.cpp and the
// provisioner_*.cpp beside it). Private to provision/.

#include <filesystem>
#include <string>

#include "autoresume/process.hpp"  // CommandResult
#include "autoresume/text.hpp"     // printable
#include "files.hpp"
#include "log.hpp"
#include "nodes/provider.hpp"  // output_tail

namespace ar::provisioner_detail {

// Why a provider call failed: its error or exit status, and its output's tail.
inline std::string failure(const CommandResult& result) {
  return (result.error.empty() ? "exit " + std::to_string(result.status) : result.error) +
         "; output: " + printable(output_tail(result.output));
}

// Writes `text` beside `path` and renames it over it (files.hpp: a reader
// sees the old file or the new one; nothing planted is followed).
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  if (const auto warning = files::replace_file(path, text); !warning.empty())
    log::warn("{}", warning);
}

}  // namespace ar::provisioner_detail
