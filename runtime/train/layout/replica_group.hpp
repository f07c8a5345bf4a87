// What a pipeline stage or a tensor-parallel rank needs from its data-parallel group
// (parallel.data = D > 1), without depending on the data plane (runtime/ knows nothing
// of comm/): the replicas of one stage (or one tensor rank) across the D copies of the
// pipeline or tensor group, numbered by layout/parallel_groups.hpp. Each replica computes its
// slice of the global batch; sum() adds their gradients, so every replica then holds the
// gradient of the whole batch. dist/comm_replica_group.hpp implements it over
// a comm::Communicator of the data group.
//
// Both sums give every replica the same bits (the contributions are added in replica
// order), which is what keeps the replicas' parameters identical step after step
// without comparing them.
//
// ZeRO inside the group (parallel.zero = 1 or 2, layout/data_group_shards.hpp): piece_of()
// cuts a run of floats into one piece per replica, reduce_scatter() leaves the sum of
// this replica's piece only, all_gather() puts every replica's piece back together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/model/param_layout.hpp"

namespace dseek::train {

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int replica() const = 0;   // 0 .. replicas() - 1
  virtual int replicas() const = 0;
  // Element-wise sum of `count` floats over the replicas, in place (collective).
  virtual void sum(float* data, size_t count) = 0;
  // Element-wise sum of a few doubles (loss, counts, votes) over the replicas.
  virtual void sum(std::span<double> values) = 0;

  // The piece [offset, offset + count) of a `count`-float run this replica owns; the
  // pieces of the replicas partition the run, in replica order.
  virtual model::ParamRange piece_of(size_t count) const = 0;
  // Element-wise sum over the replicas of `count` floats, of which only this replica's
  // piece_of(count) is written back (the rest of `data` is left as it was). Collective.
  virtual void reduce_scatter(float* data, size_t count) = 0;
  // Every replica's piece_of(count) of `data` to every replica, in place. Collective.
  virtual void all_gather(float* data, size_t count) = 0;
};

// The sequences [first, first + size) of the global batch that `replica` of
// `replicas` computes: equal consecutive slices in replica order, so that the global
// batch is the same for any number of replicas (as the data-parallel Trainer slices it).
// Throws std::invalid_argument, naming train.batch_size and parallel.data, when the
// batch does not split evenly.
struct ReplicaSlice {
  int64_t first = 0, size = 0;
};
ReplicaSlice replica_slice(int64_t batch_size, int replicas, int replica);

}  // namespace dseek::train
