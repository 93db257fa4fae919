#include "notify.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "autoresume/process.hpp"

using Catch::Matchers::Contains;

namespace {

ar::Event give_up() {
  ar::Event e;
  e.job_id = 12;
  e.run_id = "12.0-abcd";
  e.uid = 0;
  e.kind = "give_up";
  e.detail = "job 12 holds GRES\nand has no spare";
  return e;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a notification is called as MailProg, the facts in its environment", "[notify]") {
  const auto call = ar::Notifier::call_for("/usr/bin/mail", give_up(), "alice");
  CHECK(call.argv == std::vector<std::string>{"/usr/bin/mail", "-s",
                                              "auto-resume: job 12 give_up (run 12.0-abcd)",
                                              "alice"});
  CHECK_THAT(call.input, Contains("job 12 holds GRES"));
  const auto has = [&call](const std::string& entry) {
    return std::find(call.environment.begin(), call.environment.end(), entry) !=
           call.environment.end();
  };
  CHECK(has("AUTO_RESUME_EVENT=give_up"));
  CHECK(has("AUTO_RESUME_JOB_ID=12"));
  CHECK(has("AUTO_RESUME_RUN=12.0-abcd"));
  CHECK(has("AUTO_RESUME_USER=alice"));
  // A line break in the detail does not start a new variable.
  CHECK(has("AUTO_RESUME_DETAIL=job 12 holds GRES\\x0aand has no spare"));
  CHECK(ar::Notifier::notified("requeued"));
  CHECK(!ar::Notifier::notified("relaunch"));
  CHECK(ar::user_name(0) == "root");
  CHECK(ar::user_name(4000000) == "4000000");
}

TEST_CASE("a notifier runs the program for give_up and requeued only", "[notify]") {
  char pattern[] = "/tmp/ar-notify-test.XXXXXX";
  const std::filesystem::path dir = mkdtemp(pattern);
  const auto program = dir / "notify";
  const auto out = dir / "out";
  {
    std::ofstream script(program);
    script << "#!/bin/sh\n{ echo \"$*|$AUTO_RESUME_EVENT|$AUTO_RESUME_UID\"; cat; } >>"
           << out.string() << "\n";
  }
  chmod(program.c_str(), 0755);
  {
    ar::Notifier notifier(program);
    auto relaunch = give_up();
    relaunch.kind = "relaunch";
    notifier.post(relaunch);
    notifier.post(give_up());
    auto requeued = give_up();
    requeued.kind = "requeued";
    notifier.post(requeued);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    // Both runs done: each writes its line, then the detail (4 lines).
    while (std::ranges::count(read(out), '\n') < 4 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(read(out) ==
        "-s auto-resume: job 12 give_up (run 12.0-abcd) root|give_up|0\n"
        "job 12 holds GRES\\x0aand has no spare\n"
        "-s auto-resume: job 12 requeued (run 12.0-abcd) root|requeued|0\n"
        "job 12 holds GRES\\x0aand has no spare\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a notifier stopped during a call stops that call only, not the process's commands",
          "[notify]") {
  char pattern[] = "/tmp/ar-notify-test.XXXXXX";
  const std::filesystem::path dir = mkdtemp(pattern);
  const auto program = dir / "notify";
  const auto started = dir / "started";
  {
    std::ofstream script(program);
    script << "#!/bin/sh\ntouch " << started.string() << "\nexec sleep 60\n";
  }
  chmod(program.c_str(), 0755);
  {
    ar::Notifier notifier(program);
    notifier.post(give_up());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!std::filesystem::exists(started) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(std::filesystem::exists(started));
  }  // stopped while its call runs
  const auto after = ar::run_command({"/bin/echo", "still runs"}, std::chrono::seconds(10));
  CHECK(after.error.empty());
  CHECK(after.output == "still runs\n");
  std::filesystem::remove_all(dir);
}
