// all_gather across separate processes: f32, bf16 and bytes, in and out of place.
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("all_gather assembles every shard on 2 ranks", "[comm][all_gather]") { expect_scenario(2, "all_gather"); }
TEST_CASE("all_gather assembles every shard on 3 ranks", "[comm][all_gather]") { expect_scenario(3, "all_gather"); }
TEST_CASE("all_gather assembles every shard on 4 ranks", "[comm][all_gather]") { expect_scenario(4, "all_gather"); }
