#pragma once
// The controller's log (stderr) caught in a file while a StderrCapture
// lives, for tests that check what is logged and how often.

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "fakes.hpp"

namespace ar::test {

// The controller's log (stderr) while it lives.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    saved_ = dup(2);
    const int fd = open(path().c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  std::string text() const {
    std::fflush(stderr);
    std::ifstream in(path());
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

 private:
  std::filesystem::path path() const { return dir_.path / "stderr"; }
  ar::test::TempDir dir_;
  int saved_ = -1;
};

// How many lines of `text` hold `part`.
inline int lines_with(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  int count = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(part) != std::string::npos) ++count;
  return count;
}

}  // namespace ar::test
