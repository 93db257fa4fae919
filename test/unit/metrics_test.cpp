#include "server/metrics.hpp"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <thread>

#include "fakes.hpp"
#include "server/metrics_text.hpp"
#include "store/store.hpp"

using ar::metrics::Registry;
using Catch::Matchers::Contains;

TEST_CASE("a registry renders counters and gauges in the text format", "[metrics]") {
  Registry r;
  r.counter("ar_requests_total", "Requests answered.", {"op", "outcome"});
  r.gauge("ar_store_bytes", "Size of the store.");
  r.add("ar_requests_total", {"status", "ok"});
  r.add("ar_requests_total", {"status", "ok"}, 2);
  r.add("ar_requests_total", {"register", "forbidden"});
  r.set("ar_store_bytes", {}, 4096);
  CHECK(r.value("ar_requests_total", {"status", "ok"}) == 3);
  CHECK(r.value("ar_requests_total", {"hello", "ok"}) == 0);
  CHECK(r.render() ==
        "# HELP ar_requests_total Requests answered.\n"
        "# TYPE ar_requests_total counter\n"
        "ar_requests_total{op=\"register\",outcome=\"forbidden\"} 1\n"
        "ar_requests_total{op=\"status\",outcome=\"ok\"} 3\n"
        "# HELP ar_store_bytes Size of the store.\n"
        "# TYPE ar_store_bytes gauge\n"
        "ar_store_bytes 4096\n");
}

TEST_CASE("a family without labels shows 0 before its first count", "[metrics]") {
  Registry r;
  r.counter("ar_marks_total", "Nodes marked.");
  r.histogram("ar_wait_seconds", "Waits.", {1, 5});
  CHECK_THAT(r.render(), Contains("ar_marks_total 0\n"));
  CHECK_THAT(r.render(), Contains("ar_wait_seconds_bucket{le=\"+Inf\"} 0\n"));
  CHECK_THAT(r.render(), Contains("ar_wait_seconds_count 0\n"));
}

TEST_CASE("histogram buckets are cumulative, a bound counts its own value", "[metrics]") {
  Registry r;
  r.histogram("ar_call_seconds", "Calls.", {0.5, 1, 10}, {"op"});
  for (const double v : {0.2, 0.5, 0.7, 3.0, 60.0}) r.observe("ar_call_seconds", {"create"}, v);
  const auto text = r.render();
  CHECK_THAT(text, Contains("ar_call_seconds_bucket{op=\"create\",le=\"0.5\"} 2\n"));
  CHECK_THAT(text, Contains("ar_call_seconds_bucket{op=\"create\",le=\"1\"} 3\n"));
  CHECK_THAT(text, Contains("ar_call_seconds_bucket{op=\"create\",le=\"10\"} 4\n"));
  CHECK_THAT(text, Contains("ar_call_seconds_bucket{op=\"create\",le=\"+Inf\"} 5\n"));
  CHECK_THAT(text, Contains("ar_call_seconds_sum{op=\"create\"} 64.4\n"));
  CHECK_THAT(text, Contains("ar_call_seconds_count{op=\"create\"} 5\n"));
  CHECK(r.value("ar_call_seconds", {"create"}) == 5);
}

TEST_CASE("label values are escaped, gauges cleared, series touched", "[metrics]") {
  Registry r;
  r.gauge("ar_group_target", "Target.", {"group"});
  r.set("ar_group_target", {"a\"b\\c\nd"}, 2);
  CHECK_THAT(r.render(), Contains("ar_group_target{group=\"a\\\"b\\\\c\\nd\"} 2\n"));
  r.clear("ar_group_target");
  CHECK_THAT(r.render(), !Contains("ar_group_target{"));
  r.counter("ar_verdicts_total", "Verdicts.", {"verdict"});
  r.touch("ar_verdicts_total", {"give_up"});
  CHECK_THAT(r.render(), Contains("ar_verdicts_total{verdict=\"give_up\"} 0\n"));
}

TEST_CASE("misuse of a registry throws, naming the metric", "[metrics]") {
  Registry r;
  r.counter("ar_x_total", "X.", {"op"});
  CHECK_THROWS_WITH(r.counter("ar_x_total", "again"), Contains("ar_x_total declared twice"));
  CHECK_THROWS_WITH(r.gauge("1bad", "bad"), Contains("bad metric name '1bad'"));
  CHECK_THROWS_WITH(r.gauge("ar_g", "g", {"__x"}), Contains("bad label name '__x'"));
  CHECK_THROWS_WITH(r.histogram("ar_h", "h", {1}, {"le"}), Contains("bad label name 'le'"));
  CHECK_THROWS_WITH(r.histogram("ar_h2", "h", {5, 1}), Contains("must rise"));
  CHECK_THROWS_WITH(r.add("ar_y_total", {}), Contains("ar_y_total is not declared"));
  CHECK_THROWS_WITH(r.add("ar_x_total", {}), Contains("takes 1 labels, not 0"));
  CHECK_THROWS_WITH(r.add("ar_x_total", {"a"}, -1), Contains("only grows"));
  CHECK_THROWS_WITH(r.set("ar_x_total", {"a"}, 1), Contains("is a counter, not a gauge"));
  CHECK_THROWS_AS(r.clear("ar_x_total"), std::logic_error);
}

TEST_CASE("format_value writes integers, fractions and the special values", "[metrics]") {
  using ar::metrics::format_value;
  CHECK(format_value(0) == "0");
  CHECK(format_value(-3) == "-3");
  CHECK(format_value(1e15) == "1000000000000000");
  CHECK(format_value(0.25) == "0.25");
  CHECK(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_value(std::nan("")) == "NaN");
}

TEST_CASE("the controller counts events, requests and provider calls into fixed labels",
          "[metrics]") {
  ar::ControllerMetrics m;
  auto& r = m.registry();
  m.event("replaced", false);  // a step's failed node replaced within its repair
  m.event("replaced", true);   // a node's replacement done
  m.event("relaunch", false);
  m.event("marked", true);
  CHECK(r.value("auto_resume_nodes_replaced_total") == 1);
  CHECK(r.value("auto_resume_events_total", {"replaced"}) == 2);
  CHECK(r.value("auto_resume_verdicts_total", {"relaunch"}) == 1);
  CHECK(r.value("auto_resume_nodes_marked_total") == 1);
  m.request("status", "ok");
  m.request("a job id 12345", "bad_request");  // a hostile op is not a label value
  CHECK(r.value("auto_resume_requests_total", {"status", "ok"}) == 1);
  CHECK(r.value("auto_resume_requests_total", {"other", "bad_request"}) == 1);
  CHECK_THAT(r.render(), !Contains("12345"));

  ar::test::FakeRunner inner;
  ar::MeteredRunner runner(inner, m, [](const auto& words) { return words.at(1); });
  inner.set_result({0, "", ""});
  runner.run({"provider", "create"}, std::chrono::seconds(1));
  inner.set_result({3, "no capacity", ""});
  runner.run_with_env({"provider", "create"}, std::chrono::seconds(1), {"A=1"});
  inner.set_result({-1, "", "timed out"});
  runner.run({"provider", "terminate"}, std::chrono::seconds(1));
  CHECK(r.value("auto_resume_provider_calls_total", {"create", "ok"}) == 1);
  CHECK(r.value("auto_resume_provider_calls_total", {"create", "failed"}) == 1);
  CHECK(r.value("auto_resume_provider_calls_total", {"terminate", "error"}) == 1);
  CHECK(r.value("auto_resume_provider_call_seconds", {"create"}) == 2);
  m.recovered(42);
  CHECK_THAT(m.scrape({}), Contains("auto_resume_recovery_seconds_bucket{le=\"45\"} 1\n"));
  // Hangs, the quick checks by outcome, a slow Slurm, the looks' time.
  m.event("hung", false);
  m.event("checked", false);
  m.event("check_failed", false);
  m.event("check_failed", false);
  m.event("slurm_slow", true);
  CHECK(r.value("auto_resume_hangs_total") == 1);
  CHECK(r.value("auto_resume_failure_checks_total", {"passed"}) == 1);
  CHECK(r.value("auto_resume_failure_checks_total", {"failed"}) == 2);
  CHECK(r.value("auto_resume_slurmctld_slow_total") == 1);
  m.look(0.003);
  m.look(1.5);
  const auto text = m.scrape({});
  CHECK_THAT(text, Contains("auto_resume_look_seconds_bucket{le=\"0.005\"} 1\n"));
  CHECK_THAT(text, Contains("auto_resume_look_seconds_bucket{le=\"1\"} 1\n"));
  CHECK_THAT(text, Contains("auto_resume_look_seconds_bucket{le=\"2.5\"} 2\n"));
  CHECK_THAT(text, Contains("auto_resume_look_seconds_count 2\n"));
}

TEST_CASE("scrapes at once each show every gauge they set", "[metrics]") {
  char pattern[] = "/tmp/ar-metrics-test.XXXXXX";
  const std::filesystem::path dir = mkdtemp(pattern);
  {
    ar::Store store(dir);
    ar::ControllerMetrics m;
    const ar::ControllerMetrics::Sources sources{&store, nullptr, nullptr, dir, {}};
    std::atomic<int> missing{0};
    const auto scrape = [&] {
      for (int i = 0; i < 200; ++i)
        if (m.scrape(sources).find("auto_resume_steps{state=\"decided\"} 0\n") == std::string::npos)
          ++missing;
    };
    std::thread other(scrape);
    scrape();
    other.join();
    CHECK(missing == 0);
  }
  std::filesystem::remove_all(dir);
}
