// PrefetchingBatches (data.prefetch): it returns exactly the batches its source would,
// serves them from batches filled ahead once it has seen a step's calls, copes with a
// change of shape (a world that changed size), hides a slow source behind compute, and
// notes its queue depth at each step's first batch (prefetch_queue.hpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/train/batch_source.hpp"
#include "runtime/train/prefetch_queue.hpp"
#include "runtime/train/prefetching_batches.hpp"

using dseek::train::BatchSource;
using dseek::train::PrefetchingBatches;
using dseek::train::RandomBatches;
using namespace std::chrono_literals;

namespace {

// RandomBatches that take `delay` per call: a slow disk.
class SlowBatches final : public BatchSource {
 public:
  explicit SlowBatches(std::chrono::milliseconds delay) : delay_(delay) {}
  void fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count, int64_t context,
            int32_t* inputs, int32_t* targets) override {
    std::this_thread::sleep_for(delay_);
    inner_.fill(step, batch_size, first, count, context, inputs, targets);
  }

 private:
  RandomBatches inner_{7, 256};
  std::chrono::milliseconds delay_;
};

struct Batch {
  std::vector<int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
};

Batch take(BatchSource& source, uint64_t step, int64_t first, int64_t count) {
  constexpr int64_t kBatch = 12, kContext = 16;
  Batch b;
  b.inputs.resize(static_cast<size_t>(count * kContext));
  b.targets.resize(b.inputs.size());
  source.fill(step, kBatch, first, count, kContext, b.inputs.data(), b.targets.data());
  return b;
}

}  // namespace

TEST_CASE("prefetched batches equal the source's, and are served ahead after one step",
          "[data][prefetch]") {
  RandomBatches reference(7, 256);
  RandomBatches source(7, 256);
  PrefetchingBatches prefetched(source, 3);
  for (uint64_t step = 0; step < 6; ++step) {
    // A replica's slice [4, 8) in two micro-batches.
    for (int64_t first : {4, 6}) {
      INFO("step " << step << " first " << first);
      CHECK(take(prefetched, step, first, 2) == take(reference, step, first, 2));
    }
    std::this_thread::sleep_for(20ms);  // "compute": time for the thread to fill ahead
  }
  const auto stats = prefetched.stats();
  CHECK(stats.misses >= 2);  // the first step is filled on the spot
  CHECK(stats.hits >= 8);    // from step 2 on (at the latest) everything was ready
}

TEST_CASE("a new slice shape (a world of another size) is still filled right",
          "[data][prefetch]") {
  RandomBatches reference(7, 256);
  RandomBatches source(7, 256);
  PrefetchingBatches prefetched(source, 2);
  for (uint64_t step = 0; step < 3; ++step) {
    CHECK(take(prefetched, step, 0, 6) == take(reference, step, 0, 6));
    std::this_thread::sleep_for(10ms);
  }
  // Three replicas now instead of two: slice [4, 8).
  for (uint64_t step = 3; step < 6; ++step) {
    CHECK(take(prefetched, step, 4, 4) == take(reference, step, 4, 4));
    std::this_thread::sleep_for(10ms);
  }
}

TEST_CASE("prefetching hides a slow source behind compute", "[data][prefetch]") {
  SlowBatches slow(20ms);
  PrefetchingBatches prefetched(slow, 3);
  double waited_late_ms = 0;
  for (uint64_t step = 0; step < 8; ++step) {
    const auto start = std::chrono::steady_clock::now();
    take(prefetched, step, 0, 4);
    const double waited =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step >= 3) waited_late_ms += waited;
    std::this_thread::sleep_for(40ms);  // compute longer than a fill
  }
  // Steps 3..7 each found their batch ready (a fill takes 20 ms; allow scheduling noise).
  CHECK(waited_late_ms < 5 * 10.0);
}

TEST_CASE("the queue depth a step's first batch sees: data.prefetch steps once the source "
          "keeps up, none before the prefetcher learned the step's calls",
          "[data][prefetch]") {
  int64_t unseen = 0;
  std::thread([&unseen] { unseen = dseek::train::prefetch_queue_depth(); }).join();
  CHECK(unseen == -1);  // no prefetcher filled a batch on that thread
  RandomBatches source(7, 256);
  PrefetchingBatches prefetched(source, 3);
  std::vector<int64_t> depths;
  for (uint64_t step = 0; step < 6; ++step) {
    take(prefetched, step, 0, 4);
    depths.push_back(dseek::train::prefetch_queue_depth());
    take(prefetched, step, 4, 4);  // a later batch of the step: the depth stays the step's
    CHECK(dseek::train::prefetch_queue_depth() == depths.back());
    std::this_thread::sleep_for(30ms);  // "compute": time for the thread to fill ahead
  }
  INFO("depths " << depths[0] << " " << depths[1] << " " << depths[2] << " " << depths[5]);
  CHECK(depths[0] == 0);  // nothing is known before the first step
  CHECK(depths[1] == 0);  // the calls of step 0 are the pattern from step 1 on
  for (size_t step = 2; step < depths.size(); ++step) CHECK(depths[step] == 3);
}
