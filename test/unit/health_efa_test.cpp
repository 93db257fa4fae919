#include "autoresume/health_efa.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "fixture.hpp"

using ar::health::EfaPingpong;
using ar::health::Status;
using ar::health::ToolRun;

namespace {

ToolRun listing(const std::string& name, int status = 0) {
  return {status, fixture("fi_info", name), ""};
}

EfaPingpong passed(const std::string& domain) {
  return {domain,
          {0, fixture("fi_pingpong", "server-ok.txt"), ""},
          {0, fixture("fi_pingpong", "client-ok.txt"), ""}};
}

}  // namespace

TEST_CASE("fi_info's EFA devices: one RDM domain each, once", "[health]") {
  CHECK(ar::health::efa_devices(fixture("fi_info", "efa-2.txt")) ==
        std::vector<std::string>{"rdmap16s27-rdm", "rdmap32s27-rdm"});
  CHECK(ar::health::efa_devices(fixture("fi_info", "efa-old-naming.txt")) ==
        std::vector<std::string>{"efa_0-rdm"});
  CHECK(ar::health::efa_devices(fixture("fi_info", "no-efa.txt")).empty());
  CHECK(ar::health::efa_devices("provider: tcp\n    fabric: 10.0.0.0/24\n    domain: eth0\n"
                                "    version: 122.0\n    type: FI_EP_RDM\n")
            .empty());
}

TEST_CASE("EFA devices that all pass fi_pingpong pass", "[health]") {
  const auto r = ar::health::check_efa(listing("efa-2.txt"), 2,
                                       {passed("rdmap16s27-rdm"), passed("rdmap32s27-rdm")});
  CHECK(r.check == "efa");
  CHECK(r.status == Status::pass);
  CHECK(r.detail == "2 EFA devices passed fi_pingpong (rdmap16s27-rdm, rdmap32s27-rdm)");
}

TEST_CASE("EFA fails on a missing device, tool or provider", "[health]") {
  auto r = ar::health::check_efa(listing("efa-2.txt"), 4, {});
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "2 EFA devices listed by fi_info (rdmap16s27-rdm, rdmap32s27-rdm), 4 configured");
  r = ar::health::check_efa(listing("no-efa.txt", 61), 1, {});
  CHECK(r.status == Status::fail);
  CHECK(r.detail == "fi_info -p efa exited 61: fi_getinfo: -61 (No data available)");
  r = ar::health::check_efa({0, "", ""}, 1, {});
  CHECK(r.detail == "0 EFA devices listed by fi_info, 1 configured");
  r = ar::health::check_efa({-1, "", "cannot run fi_info: No such file or directory"}, 1, {});
  CHECK(r.detail == "cannot run fi_info: No such file or directory");
}

TEST_CASE("EFA fails on a failed fi_pingpong, naming the device and what it printed", "[health]") {
  auto failed = passed("rdmap32s27-rdm");
  failed.client = {1, fixture("fi_pingpong", "getinfo-fail.txt"), ""};
  auto r = ar::health::check_efa(listing("efa-2.txt"), 2, {passed("rdmap16s27-rdm"), failed});
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "EFA device rdmap32s27-rdm: fi_pingpong client exited 1: fi_getinfo(): "
        "util/pingpong.c:1203, ret=-61 (No data available)");

  // A hung device: both ends killed at the timeout; the client is named.
  EfaPingpong hung{"rdmap16s27-rdm",
                   {-1, "", "fi_pingpong did not finish within 30 s"},
                   {-1, "", "fi_pingpong did not finish within 30 s"}};
  r = ar::health::check_efa(listing("efa-2.txt"), 2, {hung});
  CHECK(r.detail ==
        "EFA device rdmap16s27-rdm: fi_pingpong client: fi_pingpong did not finish within 30 s");

  // The server's failure when the client's end says nothing wrong.
  auto server = passed("rdmap16s27-rdm");
  server.server = {1, "[error] util/pingpong.c:1522: fi_cq_read failed\n", ""};
  r = ar::health::check_efa(listing("efa-2.txt"), 2, {server, passed("rdmap32s27-rdm")});
  CHECK(r.detail ==
        "EFA device rdmap16s27-rdm: fi_pingpong server exited 1: [error] util/pingpong.c:1522: "
        "fi_cq_read failed");

  r = ar::health::check_efa(listing("efa-2.txt"), 2, {passed("rdmap16s27-rdm")});
  CHECK(r.detail == "EFA device rdmap32s27-rdm was not tested (no fi_pingpong run)");
}

TEST_CASE("EFA is not applicable where none is configured", "[health]") {
  const auto r = ar::health::check_efa({-1, "", "cannot run fi_info"}, 0, {});
  CHECK(r.status == Status::not_applicable);
  CHECK(r.detail == "no EFA devices configured for this node");
}
