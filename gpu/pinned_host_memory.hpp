// Page-locked host memory for the CUDA backend's copies (runtime/backend/host_memory.hpp):
// what CudaBackend::host_memory() hands out, so the CPU offload's host copies (the
// parameters' FP32 master copy, the gradient staging, the gradient_shard actors' AdamW
// moments) are read and written by the copy engine directly, and copy_from_host_async
// really runs beside the compute.
#pragma once

#include <memory>

#include "runtime/backend/host_memory.hpp"

namespace dseek::gpu {

// cudaHostAlloc (portable: pinned for every CUDA context of the process) / cudaFreeHost,
// checked with the cuda_check.hpp macros; `device` is made current first.
std::shared_ptr<backend::HostMemory> pinned_host_memory(int device);

}  // namespace dseek::gpu
