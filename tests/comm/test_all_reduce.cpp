// all_reduce across separate processes: sum/avg/max, f32/bf16, odd sizes, in and out of
// place, several in flight, byte counters. All ranks run on this host, so by default the
// all-reduces go through shared memory (comm/shm/); the cases with --shared-memory 0 run
// the UCX algorithms (direct, recursive halving at 4 ranks, direct reduce-scatter +
// all-gather at 3, ring) instead.
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

TEST_CASE("all_reduce through shared memory in many small chunks", "[comm][all_reduce][shm]") {
  // 4 KiB chunks: every size of the scenario spans chunks that do not split evenly.
  expect_scenario(2, "all_reduce", {"--shm-chunk-bytes", "4096"});
  expect_scenario(3, "all_reduce", {"--shm-chunk-bytes", "4096"});
  expect_scenario(3, "all_reduce_async", {"--shm-chunk-bytes", "4096"});
}
TEST_CASE("all_reduce through shared memory at every size on 4 ranks", "[comm][all_reduce][shm]") {
  // The 4-source reduce, chunks staged ahead while the previous one is gathered, in 64 KiB
  // chunks; the size limit set past every size (it has none by default).
  expect_scenario(4, "all_reduce", {"--shm-chunk-bytes", "65536", "--shm-max-bytes", "67108864"});
  expect_scenario(4, "all_reduce_async", {"--shm-chunk-bytes", "65536", "--shm-max-bytes", "67108864"});
}
TEST_CASE("all_reduce through shared memory from buffers at other page offsets on every rank", "[comm][all_reduce][shm]") {
  // Each rank's data lies where that rank put it in the slot (alias_offset.hpp); 16 KiB
  // chunks, so the 70001-element buffers span several of them.
  for (int n : {2, 3, 4})
    expect_scenario(n, "all_reduce_page_offsets", {"--shm-chunk-bytes", "16384", "--shm-max-bytes", "67108864"});
}
TEST_CASE("all_reduce over UCX only matches the serial reference on 2, 3 and 4 ranks", "[comm][all_reduce]") {
  for (int n : {2, 3, 4}) expect_scenario(n, "all_reduce", {"--shared-memory", "0"});
}
TEST_CASE("all_reduce over UCX only overlaps, threads and counts bytes", "[comm][all_reduce]") {
  expect_scenario(3, "all_reduce_async", {"--shared-memory", "0"});
  expect_scenario(4, "all_reduce_threads", {"--shared-memory", "0"});
  expect_scenario(4, "all_reduce_counters", {"--shared-memory", "0"});
}
TEST_CASE("all_reduce with the shared-memory algorithm forced, and refused by a sub-group", "[comm][all_reduce][shm]") {
  for (int n : {2, 3}) expect_scenario(n, "all_reduce_forced_shm", {"--all-reduce-algorithm", "shm"});
}
