// The tensor-parallel group as the model sees it: its size, this rank's place in it and a
// sum all-reduce. The runtime knows nothing of the data plane (DESIGN.md: runtime <-
// comm <- actors); the implementation over comm::Communicator lives in dist
// (comm_tensor_group.hpp), and the unit tests run T ranks as threads of one process.
//
// Every rank of the group must see the bitwise same result of all_reduce_sum: the
// replicated parts of the model (LayerNorms, wpe, the biases of row-parallel layers) are
// computed by each rank from the all-reduced activations and must stay identical without
// being reduced themselves.
//
// A group whose collectives read the compute backend's memory itself (NCCL on the GPU:
// comm.backend = "nccl") says so with sums_backend_memory(); the model then hands it
// its activations in place instead of staging them through host memory.
#pragma once

#include <cstddef>
#include <stdexcept>

namespace dseek::model {

class TensorGroup {
 public:
  virtual ~TensorGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: data[i] becomes the sum of data[i] over the group's ranks.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  virtual bool sums_backend_memory() const { return false; }
  // When sums_backend_memory(): all_reduce_sum on the backend's memory, after the model
  // finished the compute that wrote `data` (Backend::finish_compute).
  virtual void all_reduce_backend_sum(float* /*data*/, size_t /*count*/) {
    throw std::logic_error("TensorGroup::all_reduce_backend_sum on a group that sums host memory");
  }
};

}  // namespace dseek::model
