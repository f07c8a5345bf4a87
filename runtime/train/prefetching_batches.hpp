// data.prefetch: a BatchSource that keeps the batches of the next `depth` steps ready,
// filled by a background thread while the trainer computes, so that a slow data source
// (a cold page cache, a network file system) stalls the step only when it falls behind
// by more than `depth` steps; the step events' data_wait_ms shows when it does.
//
// It learns what to fetch from the trainer itself: the calls made for step s (this
// replica's slice of the global batch, in micro-batches) are made again for steps s+1,
// s+2, ... with the same shape. A call it did not foresee (the first step, a world that
// changed size after a node loss) is filled directly: never a wrong batch, at worst a
// slower one. A batch is a pure function of the step, so prefetching changes nothing in
// the results. At each step's first batch it notes its queue depth (the steps it has
// batches ready for: note_prefetch_queue_depth, prefetch_queue.hpp).
//
// This is the runtime-only prefetcher (a thread of the run's own); dseek-node uses its
// node's data_prefetcher actor instead (actors/node/data_prefetcher.hpp, through
// RunOptions::batch_prefetcher), which works the same way.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/train/batch_source.hpp"

namespace dseek::train {

class PrefetchingBatches final : public BatchSource {
 public:
  // `source` must be safe to call from another thread (DatasetBatches and RandomBatches
  // are pure functions of their arguments) and outlive this object.
  PrefetchingBatches(BatchSource& source, int64_t depth);
  ~PrefetchingBatches() override;
  PrefetchingBatches(const PrefetchingBatches&) = delete;
  PrefetchingBatches& operator=(const PrefetchingBatches&) = delete;

  void fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count, int64_t context,
            int32_t* inputs, int32_t* targets) override;
  int64_t vocab() const override { return source_.vocab(); }

  struct Stats {
    uint64_t hits = 0;    // calls served from a prefetched batch
    uint64_t misses = 0;  // calls filled on the spot
  };
  Stats stats() const;

 private:
  struct Call {
    int64_t batch_size, first, count, context;
    auto key() const { return std::tie(batch_size, first, count, context); }
    bool operator<(const Call& other) const { return key() < other.key(); }
    bool operator==(const Call& other) const { return key() == other.key(); }
  };
  struct Ready {
    std::vector<int32_t> inputs, targets;
  };
  void run();
  int64_t steps_ready() const;  // distinct steps in ready_ (under mutex_)

  BatchSource& source_;
  const int64_t depth_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t current_step_ = 0;        // the step the trainer asks for now
  std::vector<Call> pattern_;        // the calls of current_step_ so far, in order
  std::vector<Call> last_pattern_;   // the calls of the previous step: what to prefetch
  uint64_t next_to_prefetch_ = 0;    // the first step not prefetched yet
  std::map<std::pair<uint64_t, Call>, Ready> ready_;
  Stats stats_;
  std::thread thread_;
};

}  // namespace dseek::train
