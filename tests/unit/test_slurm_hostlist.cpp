// Tests of the Slurm host list expansion (runtime/cluster_env/slurm_hostlist.hpp): the
// forms Slurm writes in SLURM_JOB_NODELIST, each expected value as Slurm 22.05's
// `scontrol show hostnames` prints it (the slurm-labelled test compares the two on a real
// Slurm), and the malformed lists it refuses.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/cluster_env/slurm_hostlist.hpp"

using dseek::cluster_env::expand_hostlist;
using dseek::cluster_env::HostlistError;
using Hosts = std::vector<std::string>;
using Catch::Matchers::Contains;

namespace {

std::string error_of(const std::string& list) {
  try {
    expand_hostlist(list);
  } catch (const HostlistError& error) {
    return error.what();
  }
  FAIL("expected a HostlistError for " << list);
  return {};
}

}  // namespace

TEST_CASE("a host list of plain names, ranges, padding and several entries expands in order",
          "[cluster_env]") {
  CHECK(expand_hostlist("localhost") == Hosts{"localhost"});
  CHECK(expand_hostlist("host-01") == Hosts{"host-01"});
  CHECK(expand_hostlist("gpu[01-04,07]") == Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"});
  CHECK(expand_hostlist("n[1-3],m[08-11],x") ==
        Hosts{"n1", "n2", "n3", "m08", "m09", "m10", "m11", "x"});
  CHECK(expand_hostlist("n[7]") == Hosts{"n7"});
  CHECK(expand_hostlist("a1[2-3]") == Hosts{"a12", "a13"});
  CHECK(expand_hostlist("n[1-2,4-5]") == Hosts{"n1", "n2", "n4", "n5"});
  CHECK(expand_hostlist("n[00-01,5]") == Hosts{"n00", "n01", "n5"});
  CHECK(expand_hostlist("n[0001-0002]") == Hosts{"n0001", "n0002"});
}

TEST_CASE("zero padding follows the first number of each range as written", "[cluster_env]") {
  CHECK(expand_hostlist("n[009-011]") == Hosts{"n009", "n010", "n011"});
  CHECK(expand_hostlist("n[08-010]") == Hosts{"n08", "n09", "n10"});
  CHECK(expand_hostlist("n[01-2]") == Hosts{"n01", "n02"});
  CHECK(expand_hostlist("n[1-02]") == Hosts{"n1", "n2"});
  CHECK(expand_hostlist("n[9-11]") == Hosts{"n9", "n10", "n11"});
}

TEST_CASE("several bracket groups expand as their product, the first varying slowest",
          "[cluster_env]") {
  CHECK(expand_hostlist("rack[1-2]-node[01-02]") ==
        Hosts{"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"});
  CHECK(expand_hostlist("n[0-1]-[2-3]") == Hosts{"n0-2", "n0-3", "n1-2", "n1-3"});
  CHECK(expand_hostlist("n[1-2]x[3]") == Hosts{"n1x3", "n2x3"});
}

TEST_CASE("empty entries and blanks between entries are skipped", "[cluster_env]") {
  CHECK(expand_hostlist("x,,y") == Hosts{"x", "y"});
  CHECK(expand_hostlist(",x") == Hosts{"x"});
  CHECK(expand_hostlist("n[1-2] m") == Hosts{"n1", "n2", "m"});
}

TEST_CASE("a malformed host list is an error that says what is wrong", "[cluster_env]") {
  CHECK_THAT(error_of("a[1-2]b"), Contains("text after the last ']'"));
  CHECK_THAT(error_of("n[1-3]y,z[4-5]"), Contains("text after the last ']'"));
  CHECK_THAT(error_of("n[3-1]"), Contains("runs backwards"));
  CHECK_THAT(error_of("n[1-2"), Contains("'[' without ']'"));
  CHECK_THAT(error_of("n]1"), Contains("']' without '['"));
  CHECK_THAT(error_of("n[[1]]"), Contains("nested '['"));
  CHECK_THAT(error_of("n[1,,2]"), Contains("empty range"));
  CHECK_THAT(error_of("n[]"), Contains("empty brackets"));
  CHECK_THAT(error_of("n[a-b]"), Contains("bad number 'a'"));
  CHECK_THAT(error_of("n[-1]"), Contains("bad number ''"));
  CHECK_THAT(error_of("n[1-]"), Contains("bad number ''"));
  CHECK_THAT(error_of("n[ 1-2]"), Contains("bad number ' 1'"));
  CHECK_THAT(error_of(""), Contains("no host"));
  CHECK_THAT(error_of(" , "), Contains("no host"));
  CHECK_THAT(error_of("n[0-99999]"), Contains("more than 65536 hosts"));
  CHECK_THAT(error_of("a[0-999]b[0-999]"), Contains("more than 65536 hosts"));
}
