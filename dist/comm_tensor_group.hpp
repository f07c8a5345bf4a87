// model::TensorGroup over the data plane: rank r of the communicator is tensor-parallel
// rank r. The sum all-reduce is the communicator's, whose result is bitwise the same on
// every rank (the direct all-reduce adds the contributions in rank order; the ring
// reduces each segment on one rank and copies it to the others), as TensorParallelGpt
// needs for its replicated parameters.
#pragma once

#include "comm/communicator.hpp"
#include "runtime/model/tensor_group.hpp"

namespace dseek::dist {

class CommTensorGroup final : public model::TensorGroup {
 public:
  explicit CommTensorGroup(comm::Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void all_reduce_sum(float* data, size_t count) override;

 private:
  comm::Communicator& comm_;
};

}  // namespace dseek::dist
