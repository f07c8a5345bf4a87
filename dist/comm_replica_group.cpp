// Implementation of comm_replica_group.hpp.
#include "dist/comm_replica_group.hpp"

#include <algorithm>

#include "dist/ordered_double_sum.hpp"

namespace dseek::dist {

void CommReplicaGroup::sum(float* data, size_t count) {
  if (count == 0) return;
  // wait() is bounded by the communicator's operation timeout and throws on a lost peer.
  comm_.all_reduce(data, count, comm::DataType::f32, comm::ReduceOp::sum).wait();
}

void CommReplicaGroup::sum(std::span<double> values) {
  sum_doubles_in_rank_order(comm_, values, scratch_);
}

model::ParamRange CommReplicaGroup::piece_of(size_t count) const {
  return {comm_.shard_offset(count), comm_.shard_count(count)};
}

void CommReplicaGroup::reduce_scatter(float* data, size_t count) {
  if (count == 0) return;
  const model::ParamRange piece = piece_of(count);
  // The communicator's reduce-scatter writes the piece to a separate buffer (in and out
  // may not overlap); it is allocated once, at the largest run seen.
  if (piece_scratch_.size() < piece.count) piece_scratch_.resize(piece.count);
  comm_.reduce_scatter(data, piece_scratch_.data(), count, comm::DataType::f32, comm::ReduceOp::sum)
      .wait();
  std::copy_n(piece_scratch_.data(), piece.count, data + piece.offset);
}

void CommReplicaGroup::all_gather(float* data, size_t count) {
  if (count == 0) return;
  comm_.all_gather(data + piece_of(count).offset, data, count, comm::DataType::f32).wait();
}

}  // namespace dseek::dist
