// The tensor-parallel group as the model sees it: its size, this rank's place in it and a
// sum all-reduce. The runtime knows nothing of the data plane (DESIGN.md: runtime <-
// comm <- actors); the implementation over comm::Communicator lives in dist
// (comm_tensor_group.hpp), and the unit tests run T ranks as threads of one process.
//
// Every rank of the group must see the bitwise same result of all_reduce_sum: the
// replicated parts of the model (LayerNorms, wpe, the biases of row-parallel layers) are
// computed by each rank from the all-reduced activations and must stay identical without
// being reduced themselves.
#pragma once

#include <cstddef>

namespace dseek::model {

class TensorGroup {
 public:
  virtual ~TensorGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: data[i] becomes the sum of data[i] over the group's ranks.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
};

}  // namespace dseek::model
