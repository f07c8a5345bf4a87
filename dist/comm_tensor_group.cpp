// Implementation of comm_tensor_group.hpp.
#include "dist/comm_tensor_group.hpp"

namespace dseek::dist {

void CommTensorGroup::all_reduce_sum(float* data, size_t count) {
  // wait() is bounded by the communicator's operation timeout and throws on a lost peer.
  comm_.all_reduce(data, count, comm::DataType::f32, comm::ReduceOp::sum).wait();
}

}  // namespace dseek::dist
