// Faults: a rank killed mid all-reduce, abort() from another thread, a peer that never
// joins. Every surviving rank must fail within the timeout and never hang.
#include "expect_ranks.hpp"

using namespace dseek::comm::test;

TEST_CASE("a rank killed during all_reduce fails the others within the timeout", "[comm][faults]") {
  for (int n : {2, 4}) {
    const RanksResult r = run_ranks(n, "kill_during_all_reduce", {"--timeout-ms", "3000", "--chunk-bytes", "524288"},
                                    std::chrono::seconds(60));
    INFO(r.report());
    for (int rank = 0; rank < n - 1; ++rank) CHECK(r.ranks[static_cast<size_t>(rank)].exit_code == 0);
    CHECK(r.ranks.back().exit_code == 128 + 9);  // the victim died of SIGKILL
    CHECK(r.elapsed < std::chrono::seconds(30));
  }
}

TEST_CASE("a rank killed during a shared-memory all_reduce fails the others within the timeout", "[comm][faults][shm]") {
  // The 16 MiB all-reduces forced through shared memory (16 chunks, staged ahead): the
  // survivors wait on a flag the dead rank never sets, until the operation's deadline.
  for (int n : {2, 4}) {
    const RanksResult r = run_ranks(n, "kill_during_all_reduce", {"--timeout-ms", "3000", "--shm-max-bytes", "67108864"},
                                    std::chrono::seconds(60));
    INFO(r.report());
    for (int rank = 0; rank < n - 1; ++rank) CHECK(r.ranks[static_cast<size_t>(rank)].exit_code == 0);
    CHECK(r.ranks.back().exit_code == 128 + 9);
    CHECK(r.elapsed < std::chrono::seconds(30));
  }
}

TEST_CASE("with peer failure detection a killed rank fails the others at once", "[comm][faults]") {
  const RanksResult r = run_ranks(2, "kill_during_all_reduce",
                                  {"--timeout-ms", "20000", "--chunk-bytes", "524288", "--detect-peer-failure", "1"},
                                  std::chrono::seconds(60));
  INFO(r.report());
  CHECK(r.ranks[0].exit_code == 0);
  CHECK(r.ranks[1].exit_code == 128 + 9);
  CHECK(r.elapsed < std::chrono::seconds(15));  // far below the 20 s operation timeout
}

TEST_CASE("abort unblocks a waiting rank at once", "[comm][faults]") {
  expect_scenario(2, "abort_unblocks_wait", {"--timeout-ms", "20000"});
}

TEST_CASE("an operation a peer never joins fails at its deadline", "[comm][faults]") {
  expect_scenario(2, "timeout", {"--timeout-ms", "2000", "--idle-ms", "3000"});
}
