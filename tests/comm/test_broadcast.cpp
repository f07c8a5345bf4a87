// broadcast across separate processes: every root, direct and chained.
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("broadcast delivers the root's buffer on 2 ranks", "[comm][broadcast]") { expect_scenario(2, "broadcast"); }
TEST_CASE("broadcast delivers the root's buffer on 3 ranks", "[comm][broadcast]") { expect_scenario(3, "broadcast"); }
TEST_CASE("broadcast delivers the root's buffer on 4 ranks", "[comm][broadcast]") { expect_scenario(4, "broadcast"); }
