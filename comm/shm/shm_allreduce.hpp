// All-reduce through shared memory, for a world whose ranks all run on this host (see
// shared_segments.hpp). The buffer goes in chunks of the segments' chunk size; per chunk
// every rank copies the peers' shards of its input into its staging slot and publishes
// them, reduces its own shard from its input and every peer's staging slot (in rank
// order, in fp32, in one pass) into its output and its result slot and publishes
// that, stages the next chunk (the slots alternate, so this copy-in overlaps the peers'
// reduce instead of waiting for it), then copies the other ranks' reduced shards into
// its output. Two flag waits per chunk and no copy through the kernel: (N-1)/N of the
// buffer copied in, (N-1)/N out, and the reduce reads the peers' memory directly. Every
// rank gets the owner's bits of each shard.
//
// It waits by polling the peers' flags (the progress engine spins, yields, and sleeps
// in short slices while such an operation runs: no network event announces a flag). A
// peer that dies mid-chunk leaves its flag unset: the operation's deadline fails it.
#pragma once

#include <vector>

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
  // One chunk of the buffer in flight: its number (the flags' value) and its elements.
  struct Chunk {
    uint64_t number = 0;
    int slot = 0;  // of the segments' areas
    size_t first = 0;
    size_t len = 0;
  };
  enum class Phase { stage_first, reduce, gather };
  bool peers_reached(bool reduced, uint64_t chunk) const;
  // Copies the peers' shards of the chunk starting at element `first` into this rank's
  // staging slot and publishes it.
  Chunk stage(size_t first);
  // Reduces this rank's shard of `c` into the output and its result slot, publishes it.
  void reduce(const Chunk& c);
  // Copies the other ranks' reduced shards of `c` into the output.
  void gather(const Chunk& c);

  SharedSegments& seg_;
  const void* in_;
  void* out_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  float scale_;
  size_t es_ = 0;
  size_t chunk_elems_ = 0;
  uint64_t ticket_ = 0;
  Chunk current_;           // being reduced or gathered
  Chunk next_;              // staged ahead, while current_ is gathered
  bool has_next_ = false;
  Phase phase_ = Phase::stage_first;
  std::vector<const void*> sources_;  // the reduce's inputs, in rank order
};

}  // namespace dseek::comm
