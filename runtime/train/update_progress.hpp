// Which chunks of an overlapped optimizer update are done (train.offload_overlap): the
// update runs on other threads (the gradient_shard actors), each of which reports a
// chunk (a range of the flat buffer: the embedding, one block, the final LayerNorm) once
// its part of the chunk's parameters is updated; the training thread's next forward
// waits here for the chunk it is about to read, and for no other.
//
// A chunk is updated when every piece of the update that holds part of it reported it
// (a chunk no piece holds is updated at once). The counters are behind one mutex: a
// report is a handful per block and step, never a hot path. fail() wakes every waiter;
// it stays failed (a gradient_shard that went down does not come back to this update).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace dseek::train {

// A wait that could not end with the chunk updated: a piece failed, or the limit passed.
struct UpdateFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class UpdateProgress {
 public:
  // A new update: chunk c is updated once `reports_needed[c]` reports of it came in.
  void begin(std::vector<int> reports_needed);
  // One piece finished its part of `chunk` (any thread).
  void report(size_t chunk);
  // The update cannot finish (any thread): every wait throws UpdateFailed with `why`.
  void fail(const std::string& why);
  bool updated(size_t chunk) const;
  // Blocks until `chunk` is updated; UpdateFailed after fail() or after `limit`.
  void wait(size_t chunk, std::chrono::milliseconds limit) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<int> missing_;  // reports still to come, per chunk
  std::string failure_;       // empty while nothing failed
};

}  // namespace dseek::train
