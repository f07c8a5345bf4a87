// All-reduce through shared memory, for a world whose ranks all run on this host (see
// shared_segments.hpp). The buffer goes in chunks of the segments' size; per chunk every
// rank copies the peers' shards of its input into its staging area and publishes them,
// reduces its own shard from its input and every peer's staging area (in rank order, in
// fp32) into its output and its result area and publishes that, then copies the other
// ranks' reduced shards into its output. Two flag waits per chunk and no copy through
// the kernel: (N-1)/N of the buffer copied in, (N-1)/N out, and the reduce reads the
// peers' memory directly. Every rank gets the owner's bits of each shard.
//
// It waits by polling the peers' flags (the progress engine spins, yields, and sleeps
// in short slices while such an operation runs: no network event announces a flag). A
// peer that dies mid-chunk leaves its flag unset: the operation's deadline fails it.
#pragma once

#include "comm/operation.hpp"
#include "comm/shm/shared_segments.hpp"

namespace dseek::comm {

class ShmAllReduce final : public Operation {
 public:
  ShmAllReduce(OpContext ctx, SharedSegments& segments, const void* in, void* out, size_t count, DataType type,
               ReduceOp op, float scale);
  void start() override;
  bool advance() override;
  bool polls_memory() const override { return true; }

 private:
  enum class Phase { stage, reduce, gather };
  bool peers_reached(bool reduced) const;

  SharedSegments& seg_;
  const void* in_;
  void* out_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  float scale_;
  size_t es_ = 0;
  size_t chunk_elems_ = 0;
  size_t next_elem_ = 0;   // first element of the chunk in hand
  size_t chunk_len_ = 0;   // its length in elements
  uint64_t ticket_ = 0;
  uint64_t chunk_ = 0;     // its number (the flags' value)
  Phase phase_ = Phase::stage;
  StagingPool::Lease acc_;  // fp32 accumulator of this rank's shard of a chunk
};

}  // namespace dseek::comm
