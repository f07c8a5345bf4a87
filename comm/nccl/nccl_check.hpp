// Error checks for NCCL and CUDA runtime calls: DSEEK_NCCL_CHECK / DSEEK_CUDA_CHECK throw
// a CommError naming the call, the error string, and the file and line.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "comm/types.hpp"

namespace dseek::comm {

[[noreturn]] inline void throw_nccl_error(const char* call, ncclResult_t r, const char* file, int line) {
  const ErrorKind kind = r == ncclRemoteError || r == ncclSystemError ? ErrorKind::peer_failed : ErrorKind::transport;
  throw CommError(kind, std::string("NCCL error '") + ncclGetErrorString(r) + "' in " + call + " at " + file + ":" +
                            std::to_string(line));
}

[[noreturn]] inline void throw_cuda_error(const char* call, cudaError_t e, const char* file, int line) {
  throw CommError(ErrorKind::transport, std::string("CUDA error '") + cudaGetErrorString(e) + "' in " + call + " at " +
                                            file + ":" + std::to_string(line));
}

}  // namespace dseek::comm

// ncclInProgress is not an error: the communicator is non-blocking (see nccl_communicator.cpp).
#define DSEEK_NCCL_CHECK(call)                                                      \
  do {                                                                              \
    ncclResult_t dseek_nccl_result_ = (call);                                       \
    if (dseek_nccl_result_ != ncclSuccess && dseek_nccl_result_ != ncclInProgress)  \
      ::dseek::comm::throw_nccl_error(#call, dseek_nccl_result_, __FILE__, __LINE__); \
  } while (0)

#define DSEEK_CUDA_CHECK(call)                                                      \
  do {                                                                              \
    cudaError_t dseek_cuda_error_ = (call);                                         \
    if (dseek_cuda_error_ != cudaSuccess)                                           \
      ::dseek::comm::throw_cuda_error(#call, dseek_cuda_error_, __FILE__, __LINE__); \
  } while (0)
