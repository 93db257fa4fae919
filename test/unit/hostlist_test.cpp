#include "hostlist.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <vector>

using ar::slurm::compress_hostlist;
using ar::slurm::expand_hostlist;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

TEST_CASE("a hostlist expands in Slurm's order and compresses back", "[hostlist]") {
  const std::vector<std::string> hosts{"node1", "node2", "node3", "node4", "node7"};
  CHECK(expand_hostlist("node[1-4,7]") == hosts);
  CHECK(compress_hostlist(hosts) == "node[1-4,7]");
  CHECK(expand_hostlist("r[1-2]n[1-2]") ==
        std::vector<std::string>{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK_THROWS_WITH(expand_hostlist("n[3-1]"), Contains("'n[3-1]'"));
}

TEST_CASE("a hostlist of up to kMaxHosts hosts expands", "[hostlist]") {
  CHECK(expand_hostlist("n[1-65536]").size() == ar::slurm::kMaxHosts);
  CHECK(expand_hostlist("a[0-255]b[0-255]").size() == ar::slurm::kMaxHosts);
  CHECK(expand_hostlist("a[1-3]", 3).size() == 3);
}

// Found by fuzz/hostlist.cpp: libslurm expands a product of ranges whole,
// so that "a[0-9999]b[0-9999]c[0-99]" (25 bytes: 10^10 hosts) took all the
// memory there was; a sum of ranges named millions of hosts.
TEST_CASE("a hostlist of more than kMaxHosts hosts is refused before Slurm expands it",
          "[hostlist]") {
  for (const std::string expression :
       {"a[0-9999]b[0-9999]c[0-99]", "a[0-60000]b[0-60000]", "n[1-65537]", "a[0-255]b[0-255],c",
        "a[0-65535] b[0-65535]", "n[00001-99999]"}) {
    CAPTURE(expression);
    CHECK_THROWS_WITH(expand_hostlist(expression),
                      Contains("'" + expression + "'") && Contains("more than 65536 hosts"));
  }
  CHECK_THROWS_WITH(expand_hostlist("a[1-2]b[1-2]", 3), Contains("more than 3 hosts"));
}

// Found by fuzz/hostlist.cpp: libslurm counts a range up to its end in an
// unsigned long, so that a range ending at the largest one
// ("x[18446744073709551615]y[1]", or a longer number, which strtoul makes
// that) never ended, and libslurm reads odd forms oddly ("[5]-453]" is
// the range 5-453: "e[22-453][5]-453][5]" named 193,968 hosts).
TEST_CASE("a hostlist not of slurmctld's form is refused before Slurm reads it", "[hostlist]") {
  for (const std::string expression :
       {"x[18446744073709551615]y[1]", "x[730000459700032807014562]y[1]",
        "x[1-1000000000000000000]", "n[1-18446744073709551616]",
        "m[1-2][8731[5016666886666688666666666666666666002]z[4-6]", "e[22-453][5]-453][5]",
        "n[1-3]x[", "a]b", "n[1-2,]", "n[-1]", "n[ 1-2]", "n[1-2]/x"}) {
    CAPTURE(expression);
    CHECK_THROWS_WITH(expand_hostlist(expression),
                      Equals("cannot parse the node list '" + expression + "'"));
  }
  CHECK(expand_hostlist("x[999999999999999999]") ==
        std::vector<std::string>{"x999999999999999999"});
}
