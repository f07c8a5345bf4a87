// The host-aware all-reduce: ranks get fake host names, so the intra-host reduce,
// inter-host all-reduce and intra-host broadcast run (over loopback).
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("hierarchical all_reduce on two hosts of two ranks", "[comm][hierarchical]") {
  expect_scenario(4, "all_reduce", {"--hosts", "hostA,hostA,hostB,hostB"});
}
TEST_CASE("hierarchical all_reduce on interleaved uneven hosts", "[comm][hierarchical]") {
  expect_scenario(3, "all_reduce", {"--hosts", "hostA,hostB,hostA"});
}
TEST_CASE("hierarchical all_reduce inside subgroups", "[comm][hierarchical]") {
  expect_scenario(4, "subgroups", {"--hosts", "hostA,hostB,hostA,hostB"});
}
