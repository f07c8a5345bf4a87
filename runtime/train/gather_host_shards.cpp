// Implementation of gather_host_shards.hpp.
#include "runtime/train/gather_host_shards.hpp"

namespace dseek::train {

void gather_host_shards(GradientReducer& reducer, backend::Backend& backend, float* host,
                        size_t count) {
  if (!reducer.reduces_backend_memory()) {
    reducer.gather_shards(host);
    return;
  }
  auto* copy = static_cast<float*>(backend.allocate(count * sizeof(float)));
  try {
    backend.copy_from_host(copy, host, count * sizeof(float));
    reducer.gather_shards(copy);
    backend.copy_to_host(host, copy, count * sizeof(float));
  } catch (...) {
    backend.release(copy);
    throw;
  }
  backend.release(copy);
}

}  // namespace dseek::train
