// What a pipeline stage or a tensor-parallel rank needs from its data-parallel group
// (parallel.data = D > 1), without depending on the data plane (runtime/ knows nothing
// of comm/): the replicas of one stage (or one tensor rank) across the D copies of the
// pipeline or tensor group, numbered by layout/parallel_groups.hpp. Each replica computes its
// slice of the global batch; their gradients are summed, so every replica then holds the
// gradient of the whole batch. dist/comm_replica_group.hpp implements it over
// a comm::Communicator of the data group.
//
// Its gradients go through a GradientReducer of the group (make_gradient_reducer): the
// one reduction of every layout, a data-parallel job's too -- buckets, ZeRO 1/2
// (reduce-scatter, each replica's pieces, all-gather of the parameters), compression
// with error feedback. The sums give every replica the same bits, which is what keeps
// the replicas' parameters identical step after step without comparing them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "runtime/model/param_layout.hpp"
#include "runtime/train/gradient_reducer.hpp"

namespace dseek::train {

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int replica() const = 0;   // 0 .. replicas() - 1
  virtual int replicas() const = 0;
  // Element-wise sum of a few doubles (loss, counts, votes) over the replicas, added in
  // replica order (collective).
  virtual void sum(std::span<double> values) = 0;
  // Element-wise sum of `count` floats over the replicas, in place, the same bits on
  // every replica (collective): state assembled from every replica's part (fp8).
  virtual void sum(float* data, size_t count) = 0;
  // A reducer of the group's gradients with the job's settings (parallel.zero,
  // comm.compression, the buckets); one per model chunk, all on the group's data plane,
  // used by every replica in the same order.
  virtual std::unique_ptr<GradientReducer> make_gradient_reducer() = 0;
};

// The sequences [first, first + size) of the global batch that `replica` of
// `replicas` computes: equal consecutive slices in replica order, so that the global
// batch is the same for any number of replicas (a data-parallel job's replicas slice it so too).
// Throws std::invalid_argument, naming train.batch_size and parallel.data, when the
// batch does not split evenly.
struct ReplicaSlice {
  int64_t first = 0, size = 0;
};
ReplicaSlice replica_slice(int64_t batch_size, int replicas, int replica);

}  // namespace dseek::train
