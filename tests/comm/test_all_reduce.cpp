// all_reduce across separate processes: sum/avg/max, f32/bf16, odd sizes, in and out of
// place, several in flight, byte counters.
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("all_reduce matches the serial reference on 2 ranks", "[comm][all_reduce]") { expect_scenario(2, "all_reduce"); }
TEST_CASE("all_reduce matches the serial reference on 3 ranks", "[comm][all_reduce]") { expect_scenario(3, "all_reduce"); }
TEST_CASE("all_reduce matches the serial reference on 4 ranks", "[comm][all_reduce]") { expect_scenario(4, "all_reduce"); }
TEST_CASE("all_reduce operations overlap and complete in any wait order", "[comm][all_reduce]") {
  expect_scenario(3, "all_reduce_async");
}
TEST_CASE("all_reduce waited from several threads and polled by test on 3 ranks", "[comm][all_reduce]") {
  expect_scenario(3, "all_reduce_threads");
}
TEST_CASE("all_reduce waited from several threads and polled by test on 4 ranks", "[comm][all_reduce]") {
  expect_scenario(4, "all_reduce_threads");
}
TEST_CASE("all_reduce counts the bytes it moves", "[comm][all_reduce]") {
  expect_scenario(2, "all_reduce_counters");
  expect_scenario(4, "all_reduce_counters");
}
