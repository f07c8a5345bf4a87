// query_devices() through the CUDA runtime. On a machine without a GPU (only the stub
// libcuda) cudaGetDeviceCount fails with "driver version is insufficient": that is
// reported as the reason, not as a crash.
#include <cuda_runtime.h>

#include "gpu/device_info.hpp"

namespace dseek::gpu {

DeviceQuery query_devices() {
  DeviceQuery query;
  query.cuda_built = true;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    query.error = std::string("CUDA: ") + cudaGetErrorString(status);
    return query;
  }
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp prop{};
    status = cudaGetDeviceProperties(&prop, index);
    if (status != cudaSuccess) {
      query.error = std::string("CUDA device ") + std::to_string(index) + ": " +
                    cudaGetErrorString(status);
      return query;
    }
    query.devices.push_back({index, prop.name, prop.major, prop.minor,
                             static_cast<uint64_t>(prop.totalGlobalMem),
                             prop.multiProcessorCount});
  }
  return query;
}

}  // namespace dseek::gpu
