// CheckpointSink: where the training loop hands its checkpoint snapshots to be persisted.
// The loop copies its state into the sink's host buffer at a step boundary (that copy is
// the only pause training sees), submits it, and goes on; the sink writes it elsewhere
// and reports an outcome per write. One snapshot is in flight at most: while busy(),
// the next checkpoint due is skipped, never queued.
//
// Two implementations: CheckpointWriter (writer_thread.hpp), a thread of the run's own,
// the default; and in dseek-node the node's checkpoint_writer actor
// (actors/node/checkpoint_writer.hpp), handed in through RunOptions::checkpoint_sink.
// The runtime sees only this interface, so it knows nothing of actors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/checkpoint/write.hpp"

namespace dseek::checkpoint {

struct WriteOutcome {
  int64_t step = 0;
  bool ok = false;
  std::string error;   // when !ok
  WriteResult result;  // when ok
};

// Writes `snapshot` (write_checkpoint) and reports instead of throwing: a failed
// checkpoint never stops training, the caller reports it and tries the next.
WriteOutcome write_reporting(const Snapshot& snapshot, WriteOptions options, bool fail_midway);

class CheckpointSink {
 public:
  virtual ~CheckpointSink() = default;  // implementations finish the write in flight

  // A write is in flight: buffer() must not be touched, and submit() must not be called.
  virtual bool busy() const = 0;
  // The snapshot buffer to fill before submit(); only while !busy().
  virtual Snapshot& buffer() = 0;
  // Hands buffer() over to be written and returns at once (a synchronous sink writes
  // first); fail_midway injects the fail_checkpoint_write fault.
  virtual void submit(bool fail_midway) = 0;
  // Waits until no write is in flight.
  virtual void wait() = 0;
  // The outcomes of the writes finished since the last call, oldest first.
  virtual std::vector<WriteOutcome> take_outcomes() = 0;
  // The step of the write in flight (meaningful while busy()).
  virtual int64_t in_flight_step() const = 0;
  // Who writes, for the events: "thread" or "actor".
  virtual const char* kind() const = 0;
};

// Makes the sink of one run from where and how to write; null in RunOptions means the
// default, a CheckpointWriter thread.
using CheckpointSinkFactory =
    std::function<std::unique_ptr<CheckpointSink>(const WriteOptions& options)>;

}  // namespace dseek::checkpoint
