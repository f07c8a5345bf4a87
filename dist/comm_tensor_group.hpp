// model::TensorGroup over the data plane: rank r of the communicator is tensor-parallel
// rank r. The sum all-reduce is the communicator's, whose result is bitwise the same on
// every rank (the direct all-reduce adds the contributions in rank order; the ring
// reduces each segment on one rank and copies it to the others), as GptModel over a
// group needs for its replicated parameters.
//
// With a `device` communicator (the tensor group cut from the epoch's NCCL one,
// comm.backend = "nccl") the model's all-reduces run on the backend's memory through it
// (sums_backend_memory); sums of host memory stay on `host`.
#pragma once

#include "comm/communicator.hpp"
#include "runtime/model/tensor_group.hpp"

namespace dseek::dist {

class CommTensorGroup final : public model::TensorGroup {
 public:
  // `host` (and `device`, when given) outlive the group; the same ranks in the same order.
  explicit CommTensorGroup(comm::Communicator& host, comm::Communicator* device = nullptr)
      : comm_(host), device_(device) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void all_reduce_sum(float* data, size_t count) override;
  bool sums_backend_memory() const override { return device_ != nullptr; }
  void all_reduce_backend_sum(float* data, size_t count) override;

 private:
  comm::Communicator& comm_;
  comm::Communicator* device_;
};

}  // namespace dseek::dist
