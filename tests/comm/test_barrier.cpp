// barrier across separate processes: nobody leaves before the last rank arrives.
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("barrier waits for the last rank on 2 ranks", "[comm][barrier]") { expect_scenario(2, "barrier"); }
TEST_CASE("barrier waits for the last rank on 3 ranks", "[comm][barrier]") { expect_scenario(3, "barrier"); }
TEST_CASE("barrier waits for the last rank on 4 ranks", "[comm][barrier]") { expect_scenario(4, "barrier"); }
