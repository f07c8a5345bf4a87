// The latency-optimised all-reduce for small buffers: every rank sends its whole buffer
// to every other rank at once (one round trip instead of the ring's 2(N-1) steps) and
// sums all contributions in rank order in fp32, so every rank gets the same bits.
#pragma once

#include <vector>

#include "comm/operation.hpp"

namespace dseek::comm {

class DirectAllReduce final : public Operation {
 public:
  DirectAllReduce(OpContext ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op, float scale);
  void start() override;
  bool advance() override;

 private:
  const void* in_;
  void* out_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  float scale_;
  StagingPool::Lease inbox_;  // one slot per peer
  StagingPool::Lease acc_;    // fp32 accumulator
  std::vector<IoPtr> sends_, recvs_;
};

}  // namespace dseek::comm
