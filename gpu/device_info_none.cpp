// query_devices() for a build without CUDA (DSEEK_WITH_CUDA=OFF or no nvcc found).
#include "gpu/device_info.hpp"

namespace dseek::gpu {

DeviceQuery query_devices() {
  DeviceQuery query;
  query.error = "this build of dseek has no CUDA support (configured with DSEEK_WITH_CUDA=OFF "
                "or nvcc was not found)";
  return query;
}

}  // namespace dseek::gpu
