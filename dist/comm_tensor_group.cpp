// Implementation of comm_tensor_group.hpp.
#include "dist/comm_tensor_group.hpp"

namespace dseek::dist {

void CommTensorGroup::all_reduce_sum(float* data, size_t count) {
  // wait() is bounded by the communicator's operation timeout and throws on a lost peer.
  comm_.all_reduce(data, count, comm::DataType::f32, comm::ReduceOp::sum).wait();
}

void CommTensorGroup::all_reduce_backend_sum(float* data, size_t count) {
  if (device_ == nullptr) {
    model::TensorGroup::all_reduce_backend_sum(data, count);  // throws: a host-memory group
    return;
  }
  device_->all_reduce(data, count, comm::DataType::f32, comm::ReduceOp::sum).wait();
}

}  // namespace dseek::dist
