// The recursive halving + doubling all-reduce (comm/recursive_halving.hpp), forced by
// --all-reduce-algorithm halving whatever the size, across separate processes: every op,
// type and size of the all_reduce scenario against the serial reference on 2, 3 (one
// folded pair) and 4 ranks, the same bits on every rank (6 ranks: two folded pairs),
// sub-groups, and a killed rank or abort() failing the others within the timeout.
#include "comm/types.hpp"
#include "expect_ranks.hpp"

using namespace dseek::comm::test;

namespace {
const std::vector<std::string> kHalving{"--all-reduce-algorithm", "halving"};

std::vector<std::string> halving_with(std::vector<std::string> extra) {
  extra.insert(extra.end(), kHalving.begin(), kHalving.end());
  return extra;
}
}  // namespace

TEST_CASE("recursive halving all_reduce matches the serial reference on 2, 3 and 4 ranks", "[comm][halving]") {
  for (int n : {2, 3, 4}) expect_scenario(n, "all_reduce", kHalving);
}

TEST_CASE("recursive halving all_reduce gives every rank the same bits on 3, 4 and 6 ranks", "[comm][halving]") {
  for (int n : {3, 4, 6}) expect_scenario(n, "all_reduce_bits", kHalving);
}

TEST_CASE("recursive halving all_reduce overlaps, threads and counts bytes", "[comm][halving]") {
  expect_scenario(3, "all_reduce_async", kHalving);
  expect_scenario(4, "all_reduce_threads", kHalving);
  expect_scenario(4, "all_reduce_counters", kHalving);
}

TEST_CASE("recursive halving all_reduce in sub-groups beside the world", "[comm][halving][subgroup]") {
  // Even / odd halves (2 and 1 or 2 ranks), the reversed world, a one-rank group.
  for (int n : {3, 4}) expect_scenario(n, "subgroups", kHalving);
}

TEST_CASE("a rank killed during a recursive halving all_reduce fails the others within the timeout",
          "[comm][halving][faults]") {
  for (int n : {3, 4}) {
    const RanksResult r = run_ranks(n, "kill_during_all_reduce", halving_with({"--timeout-ms", "3000"}),
                                    std::chrono::seconds(60));
    INFO(r.report());
    for (int rank = 0; rank < n - 1; ++rank) CHECK(r.ranks[static_cast<size_t>(rank)].exit_code == 0);
    CHECK(r.ranks.back().exit_code == 128 + 9);  // the victim died of SIGKILL
    CHECK(r.elapsed < std::chrono::seconds(30));
  }
}

TEST_CASE("abort unblocks a rank waiting in a recursive halving all_reduce", "[comm][halving][faults]") {
  expect_scenario(2, "abort_unblocks_wait", halving_with({"--timeout-ms", "20000"}));
}

TEST_CASE("all-reduce algorithm names parse, and an unknown one names its knob", "[comm][halving]") {
  using dseek::comm::AllReduceAlgorithm;
  using dseek::comm::parse_all_reduce_algorithm;
  for (auto a : {AllReduceAlgorithm::automatic, AllReduceAlgorithm::shared_memory, AllReduceAlgorithm::direct,
                 AllReduceAlgorithm::direct_rsag, AllReduceAlgorithm::recursive_halving, AllReduceAlgorithm::ring})
    CHECK(parse_all_reduce_algorithm(dseek::comm::to_string(a), "knob") == a);
  CHECK_THROWS_WITH(parse_all_reduce_algorithm("tree", "DSEEK_COMM_ALLREDUCE"),
                    Catch::Contains("DSEEK_COMM_ALLREDUCE") && Catch::Contains("tree"));
}
