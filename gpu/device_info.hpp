// What CUDA devices this process can use. The CUDA backend (a later issue) builds on
// it; `dseek devices` prints it. In a build without CUDA it says so instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dseek::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  uint64_t memory_bytes = 0;
  int multiprocessors = 0;
};

struct DeviceQuery {
  bool cuda_built = false;    // this binary was built with CUDA
  std::string error;          // why no device is usable (driver missing, ...); empty if fine
  std::vector<DeviceInfo> devices;
};

DeviceQuery query_devices();

}  // namespace dseek::gpu
