// train::ReplicaGroup over the data plane: rank r of the communicator (a data-parallel
// group cut by parallel_communicators.hpp) is replica r. The float sum is the
// communicator's all-reduce, whose result is bitwise the same on every rank (the direct
// all-reduce adds the contributions in rank order; the ring reduces each segment on one
// rank and copies it to the others); the double sums are added in rank order. ZeRO's
// pieces are the communicator's reduce-scatter / all-gather shards (shard_offset,
// shard_count), so they move with one collective each.
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "runtime/train/layout/replica_group.hpp"

namespace dseek::dist {

class CommReplicaGroup final : public train::ReplicaGroup {
 public:
  explicit CommReplicaGroup(comm::Communicator& comm) : comm_(comm) {}
  int replica() const override { return comm_.rank(); }
  int replicas() const override { return comm_.size(); }
  void sum(float* data, size_t count) override;
  void sum(std::span<double> values) override;
  model::ParamRange piece_of(size_t count) const override;
  void reduce_scatter(float* data, size_t count) override;
  void all_gather(float* data, size_t count) override;

 private:
  comm::Communicator& comm_;
  std::vector<unsigned char> scratch_;
  std::vector<float> piece_scratch_;  // reduce_scatter's output, kept between calls
};

}  // namespace dseek::dist
