#include "autoresume/connect.hpp"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <string>

using namespace std::chrono_literals;
using ar::net::Clock;

namespace {

// A lookup that answers only once released (or after a minute): a name
// server that does not answer.
struct HungLookup {
  std::mutex mutex;
  std::condition_variable changed;
  bool released = false;
  bool returned = false;

  int operator()(const char*, const char*, const addrinfo*, addrinfo**) {
    std::unique_lock lock(mutex);
    changed.wait_for(lock, 60s, [&] { return released; });
    returned = true;
    changed.notify_all();
    return EAI_AGAIN;
  }
  void release_and_wait() {
    std::unique_lock lock(mutex);
    released = true;
    changed.notify_all();
    changed.wait(lock, [&] { return returned; });
  }
};

}  // namespace

TEST_CASE("resolve_by takes a numeric address without a lookup, even past the deadline",
          "[connect]") {
  bool looked_up = false;
  const ar::net::Lookup lookup = [&](const char*, const char*, const addrinfo*, addrinfo**) {
    looked_up = true;
    return EAI_FAIL;
  };
  std::string error;
  for (const std::string host : {"127.0.0.1", "::1"}) {
    const auto found = ar::net::resolve_by(host, 7860, Clock::now() - 1s, error, lookup);
    REQUIRE(found);
    CHECK(found->ai_socktype == SOCK_STREAM);
  }
  CHECK_FALSE(looked_up);
}

TEST_CASE("resolve_by looks a name up and reports the lookup's failure", "[connect]") {
  std::string asked;
  const ar::net::Lookup answers = [&](const char* host, const char* service, const addrinfo* hints,
                                      addrinfo** found) {
    asked = std::string(host) + ":" + service;
    return getaddrinfo("127.0.0.1", service, hints, found);
  };
  std::string error;
  const auto found =
      ar::net::resolve_by("ctl.example.org", 7860, Clock::now() + 10s, error, answers);
  REQUIRE(found);
  CHECK(asked == "ctl.example.org:7860");
  const ar::net::Lookup fails = [](const char*, const char*, const addrinfo*, addrinfo**) {
    return EAI_NONAME;
  };
  CHECK_FALSE(ar::net::resolve_by("ctl.example.org", 7860, Clock::now() + 10s, error, fails));
  CHECK(error == gai_strerror(EAI_NONAME));
}

TEST_CASE("resolve_by leaves a lookup that does not answer at the deadline", "[connect]") {
  HungLookup hung;
  std::string error;
  const auto found = ar::net::resolve_by("ctl.example.org", 7860, Clock::now() + 100ms, error,
                                         [&](const char* h, const char* s, const addrinfo* hints,
                                             addrinfo** f) { return hung(h, s, hints, f); });
  CHECK_FALSE(found);
  CHECK(error == ar::net::kTimedOut);
  hung.release_and_wait();  // the abandoned thread ends on its own
}
