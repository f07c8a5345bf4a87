// The compressed all-reduce across separate processes (rank/scenario_compressed.cpp):
// exact and identical results, the bytes it saves, and error feedback over 50 steps.
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("compressed all_reduce is the exact decode-sum on 2 ranks", "[comm][compressed]") { expect_scenario(2, "compressed_all_reduce"); }
TEST_CASE("compressed all_reduce is the exact decode-sum on 3 ranks", "[comm][compressed]") { expect_scenario(3, "compressed_all_reduce"); }
TEST_CASE("compressed all_reduce with topk 5% and int8 saves 90% of the bytes on 2 ranks", "[comm][compressed]") {
  expect_scenario(2, "compressed_all_reduce_bytes");
}
TEST_CASE("compressed all_reduce with topk 5% and int8 saves 90% of the bytes on 3 ranks", "[comm][compressed]") {
  expect_scenario(3, "compressed_all_reduce_bytes");
}
TEST_CASE("compressed all_reduce error feedback tracks the running sum on 2 ranks", "[comm][compressed]") {
  expect_scenario(2, "compressed_all_reduce_feedback");
}
TEST_CASE("compressed all_reduce error feedback tracks the running sum on 3 ranks", "[comm][compressed]") {
  expect_scenario(3, "compressed_all_reduce_feedback");
}
