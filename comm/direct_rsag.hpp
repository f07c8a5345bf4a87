// All-reduce as a direct reduce-scatter then a direct all-gather: every rank sends each
// peer that peer's shard of its input at once, reduces the contributions to its own
// shard in rank order (fp32), then sends its reduced shard to every peer. Two rounds
// instead of the ring's 2(N-1) steps, the same bytes per rank as the ring: it suits
// mid-size buffers and more ranks than cores, where every ring step waits for a
// neighbour to be scheduled. Every rank gets the owner's bits of each shard.
#pragma once

#include <vector>

#include "comm/operation.hpp"

namespace dseek::comm {

class DirectRsAgAllReduce final : public Operation {
 public:
  DirectRsAgAllReduce(OpContext ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op, float scale);
  void start() override;
  bool advance() override;

 private:
  const void* in_;
  void* out_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  float scale_;
  size_t es_ = 0;
  int phase_ = 0;  // 0: reduce-scatter in flight, 1: all-gather in flight
  bool gather_recvs_posted_ = false;
  StagingPool::Lease inbox_;  // one shard-sized slot per rank
  StagingPool::Lease acc_;    // fp32 accumulator of this rank's shard
  std::vector<IoPtr> scatter_sends_, scatter_recvs_, gather_sends_, gather_recvs_;
};

}  // namespace dseek::comm
