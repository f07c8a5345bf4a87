// Point-to-point send/recv across separate processes: ring shifts, ordering, sizes.
#include "expect_ranks.hpp"

using dseek::comm::test::expect_scenario;

TEST_CASE("send and recv deliver in order on 2 ranks", "[comm][send_recv]") { expect_scenario(2, "send_recv"); }
TEST_CASE("send and recv deliver in order on 3 ranks", "[comm][send_recv]") { expect_scenario(3, "send_recv"); }
TEST_CASE("send and recv deliver in order on 4 ranks", "[comm][send_recv]") { expect_scenario(4, "send_recv"); }
