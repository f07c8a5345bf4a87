// CheckpointWriter: persists snapshots on a background thread while training goes on.
// The trainer copies its state into the writer's one host snapshot buffer at a step
// boundary (a memcpy, the only pause training sees) and submits it; the thread writes
// it (write.hpp). While a write is in flight the buffer is busy and the next checkpoint
// due is skipped, never queued, so at most one snapshot's memory and one write exist.
//
// This is a plain class owning a std::thread; the checkpoint_writer actor of the design
// (DESIGN.md, node supervisor tree) wraps it when the actor runtime lands.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/checkpoint/write.hpp"

namespace dseek::checkpoint {

struct WriteOutcome {
  int64_t step = 0;
  bool ok = false;
  std::string error;  // when !ok
  WriteResult result;  // when ok
};

class CheckpointWriter {
 public:
  // async = false writes in submit() itself (the synchronous baseline of the benchmark).
  CheckpointWriter(WriteOptions options, bool async);
  ~CheckpointWriter();  // finishes the write in flight, then joins
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // A write is in flight: buffer() must not be touched, and submit() must not be called.
  bool busy() const;
  // The snapshot buffer to fill before submit(); only while !busy().
  Snapshot& buffer() { return snapshot_; }
  // Writes buffer(); fail_midway injects the fail_checkpoint_write fault.
  void submit(bool fail_midway);
  // Waits until no write is in flight.
  void wait();
  // The outcomes of the writes finished since the last call, oldest first.
  std::vector<WriteOutcome> take_outcomes();
  // The step of the write in flight (meaningful while busy()).
  int64_t in_flight_step() const;

 private:
  void run();
  WriteOutcome write_now(bool fail_midway);

  WriteOptions options_;
  bool async_;
  Snapshot snapshot_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  bool pending_ = false, fail_midway_ = false, stopping_ = false;
  std::vector<WriteOutcome> outcomes_;
  std::thread thread_;
};

}  // namespace dseek::checkpoint
