// reduce_scatter across separate processes: each rank's shard, any length.
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("reduce_scatter matches the serial reference on 2 ranks", "[comm][reduce_scatter]") { expect_scenario(2, "reduce_scatter"); }
TEST_CASE("reduce_scatter matches the serial reference on 3 ranks", "[comm][reduce_scatter]") { expect_scenario(3, "reduce_scatter"); }
TEST_CASE("reduce_scatter matches the serial reference on 4 ranks", "[comm][reduce_scatter]") { expect_scenario(4, "reduce_scatter"); }
