// auto-resume-submit: submits an expand helper (the allocation of a
// replacement node that a job absorbs) as whoever runs it. auto-resumed
// runs it as the job's owner, so that slurmctld, its job_submit plugins and
// its limits see that user as the submitter, not root. It reads the request
// (JSON, expand_helper.hpp) on stdin and prints the new job's id.
//
// It holds no privilege: run by a user, it allocates nothing that user
// could not allocate with salloc.

#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "autoresume/version.hpp"
#include "slurm_adapter.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "auto-resume-submit: submit the expand helper described by the JSON on stdin, as the "
      "calling user, and print its job id (auto-resumed runs it as the job's owner)",
      "auto-resume-submit"};
  app.set_version_flag("-V,--version", std::string("auto-resume-submit ") + ar::kVersion);
  CLI11_PARSE(app, argc, argv);

  ar::slurm::ExpandRequest request;
  try {
    const std::string text{std::istreambuf_iterator<char>(std::cin),
                           std::istreambuf_iterator<char>()};
    request = ar::slurm::parse_expand_request(text);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "auto-resume-submit: {}\n", e.what());
    return ar::slurm::kSubmitBadInput;
  }
  try {
    ar::slurm::init();
    const auto id = ar::slurm::allocate_expand_helper(request, getuid(), getgid());
    fmt::print("{}\n", id);
  } catch (const std::exception& e) {
    fmt::print(stderr, "auto-resume-submit: {}\n", e.what());
    return ar::slurm::kSubmitRefused;
  }
  return 0;
}
