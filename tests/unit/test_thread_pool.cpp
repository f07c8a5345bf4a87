// The compute thread pool: every index is visited exactly once, chunks are a fixed
// function of (n, threads), and back-to-back jobs (hundreds per training step) never
// lose a worker, including jobs published right after the pool starts.
#include <catch2/catch.hpp>

#include <atomic>
#include <vector>

#include "runtime/util/thread_pool.hpp"

using dseek::util::ThreadPool;

TEST_CASE("parallel_for visits every index once", "[util][threads]") {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (size_t n : {0u, 1u, 2u, 7u, 1000u}) {
      std::vector<std::atomic<int>> visits(n);
      pool.parallel_for(n, [&](size_t begin, size_t end, int) {
        for (size_t i = begin; i < end; ++i) visits[i]++;
      });
      for (size_t i = 0; i < n; ++i) REQUIRE(visits[i] == 1);
    }
  }
}

TEST_CASE("chunks are contiguous, ordered and a function of n and the thread count",
          "[util][threads]") {
  ThreadPool pool(3);
  CHECK(pool.chunks_for(10, 1) == 3);
  CHECK(pool.chunks_for(10, 8) == 2);
  CHECK(pool.chunks_for(5, 100) == 1);
  size_t expected_begin = 0;
  for (int i = 0; i < 3; ++i) {
    size_t begin, end;
    ThreadPool::chunk_bounds(10, 3, i, begin, end);
    CHECK(begin == expected_begin);
    expected_begin = end;
  }
  CHECK(expected_begin == 10);
  std::vector<int> owner(10, -1);
  pool.parallel_for(10, [&](size_t begin, size_t end, int thread) {
    for (size_t i = begin; i < end; ++i) owner[i] = thread;
  });
  CHECK(owner == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 2, 2, 2});
}

TEST_CASE("many short jobs on fresh pools finish (no lost wake-up)", "[util][threads]") {
  // A regression test: a job published before a worker first ran used to be missed,
  // and the caller spun forever.
  for (int round = 0; round < 200; ++round) {
    ThreadPool pool(2);
    std::atomic<size_t> total{0};
    for (int job = 0; job < 50; ++job)
      pool.parallel_for(64, [&](size_t begin, size_t end, int) { total += end - begin; });
    REQUIRE(total == 50u * 64u);
  }
}
