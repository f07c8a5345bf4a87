// Sub-group communicators across separate processes, alongside world collectives.
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("subgroups run collectives beside the world on 3 ranks", "[comm][subgroup]") { expect_scenario(3, "subgroups"); }
TEST_CASE("subgroups run collectives beside the world on 4 ranks", "[comm][subgroup]") { expect_scenario(4, "subgroups"); }
