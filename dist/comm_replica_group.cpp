// Implementation of comm_replica_group.hpp.
#include "dist/comm_replica_group.hpp"

#include "dist/comm_gradient_reducer.hpp"
#include "dist/ordered_double_sum.hpp"

namespace dseek::dist {

void CommReplicaGroup::sum(std::span<double> values) {
  sum_doubles_in_rank_order(comm_, values, scratch_);
}

void CommReplicaGroup::sum(float* data, size_t count) {
  if (count == 0) return;
  // wait() is bounded by the communicator's operation timeout and throws on a lost peer.
  comm_.all_reduce(data, count, comm::DataType::f32, comm::ReduceOp::sum).wait();
}

std::unique_ptr<train::GradientReducer> CommReplicaGroup::make_gradient_reducer() {
  const bool on_device = settings_.backend_memory && device_ != nullptr;
  return std::make_unique<CommGradientReducer>(on_device ? *device_ : comm_, settings_);
}

}  // namespace dseek::dist
