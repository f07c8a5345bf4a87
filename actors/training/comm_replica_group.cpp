// Implementation of comm_replica_group.hpp.
#include "actors/training/comm_replica_group.hpp"

#include "actors/training/ordered_double_sum.hpp"

namespace dseek::actors {

void CommReplicaGroup::sum(float* data, size_t count) {
  if (count == 0) return;
  // wait() is bounded by the communicator's operation timeout and throws on a lost peer.
  comm_.all_reduce(data, count, comm::DataType::f32, comm::ReduceOp::sum).wait();
}

void CommReplicaGroup::sum(std::span<double> values) {
  sum_doubles_in_rank_order(comm_, values, scratch_);
}

}  // namespace dseek::actors
