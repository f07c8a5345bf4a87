// Error checks for CUDA runtime and cuBLAS / cuBLASLt calls: a failed call throws a
// std::runtime_error naming the call, the file and line, and the library's reason, so a
// failure on a GPU machine says where it happened without a debugger.
//
//   DSEEK_CUDA_CHECK(cudaMalloc(&p, bytes));
//   DSEEK_CUBLAS_CHECK(cublasLtMatmul(...));
//
// The cuBLAS status is named here rather than through cublasGetStatusString, so code
// that uses cuBLASLt alone does not need libcublas.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace dseek::gpu::detail {

inline const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE (unsupported type, layout or shape combination)";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH (not supported on this GPU)";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                          int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                           " failed: " + cudaGetErrorName(status) + ": " +
                           cudaGetErrorString(status));
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call,
                                            const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                           " failed: " + cublas_status_name(status) + " (" +
                           std::to_string(static_cast<int>(status)) + ")");
}

}  // namespace dseek::gpu::detail

#define DSEEK_CUDA_CHECK(call)                                                         \
  do {                                                                                 \
    const cudaError_t dseek_cuda_status_ = (call);                                     \
    if (dseek_cuda_status_ != cudaSuccess)                                             \
      ::dseek::gpu::detail::throw_cuda_error(dseek_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define DSEEK_CUBLAS_CHECK(call)                                                         \
  do {                                                                                   \
    const cublasStatus_t dseek_cublas_status_ = (call);                                  \
    if (dseek_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::dseek::gpu::detail::throw_cublas_error(dseek_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)
