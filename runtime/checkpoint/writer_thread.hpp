// CheckpointWriter: persists snapshots on a background thread while training goes on.
// The trainer copies its state into the writer's one host snapshot buffer at a step
// boundary (a memcpy, the only pause training sees) and submits it; the thread writes
// it (write.hpp). While a write is in flight the buffer is busy and the next checkpoint
// due is skipped, never queued, so at most one snapshot's memory and one write exist.
//
// This is the default CheckpointSink (sink.hpp), a plain class owning a std::thread;
// dseek-node hands its snapshots to the node's checkpoint_writer actor instead.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/checkpoint/sink.hpp"

namespace dseek::checkpoint {

class CheckpointWriter final : public CheckpointSink {
 public:
  // async = false writes in submit() itself (the synchronous baseline of the benchmark).
  CheckpointWriter(WriteOptions options, bool async);
  ~CheckpointWriter() override;  // finishes the write in flight, then joins
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  bool busy() const override;
  Snapshot& buffer() override { return snapshot_; }
  void submit(bool fail_midway) override;
  void wait() override;
  std::vector<WriteOutcome> take_outcomes() override;
  int64_t in_flight_step() const override;
  const char* kind() const override { return "thread"; }

 private:
  void run();

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
