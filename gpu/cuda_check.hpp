// The one family of CUDA error checks used by gpu/: every runtime and cuBLAS call, and
// every kernel launch, goes through these, so a failure names the file, the line, the
// error code and the call that failed, in a std::runtime_error, e.g.
//   "gpu/cuda_backend.cu:42: cudaErrorInvalidValue: invalid argument in `cudaMemsetAsync(...)`".
//
// A kernel launch is checked at once with cudaGetLastError (configuration errors), which
// costs nothing. Errors inside a kernel are reported by CUDA only at the next
// synchronisation, far from their cause; with synchronous launch checks on (debug
// builds, the GPU tests, or DSEEK_CUDA_SYNC_CHECKS=1 in the environment) every launch is
// followed by a stream synchronisation, so the failing kernel is the one named.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace dseek::gpu {

[[noreturn]] inline void throw_cuda_error(const char* file, int line, const char* code,
                                          const char* message, const char* call) {
  std::string text = file;
  text += ':';
  text += std::to_string(line);
  text += ": ";
  text += code;
  text += ": ";
  text += message;
  text += " in `";
  text += call;
  text += '`';
  throw std::runtime_error(text);
}

inline void check_cuda(cudaError_t status, const char* file, int line, const char* call) {
  if (status != cudaSuccess) {
    // A failed call also becomes the thread's "last error" until cudaGetLastError reads
    // it; left there, the next check_launch on this thread would report it as that
    // kernel's failure (a caught error, e.g. an out-of-memory the caller recovers from,
    // would fail an unrelated launch later). Clear it: this throw reports it. Sticky
    // errors (a faulted context) stay, and every later call reports them anyway.
    cudaGetLastError();
    throw_cuda_error(file, line, cudaGetErrorName(status), cudaGetErrorString(status), call);
  }
}

inline void check_cublas(cublasStatus_t status, const char* file, int line, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw_cuda_error(file, line, cublasGetStatusName(status), cublasGetStatusString(status),
                     call);
}

// Whether every kernel launch synchronises its stream to surface asynchronous errors.
inline std::atomic<bool>& synchronous_launch_checks() {
#ifdef NDEBUG
  static std::atomic<bool> enabled{std::getenv("DSEEK_CUDA_SYNC_CHECKS") != nullptr &&
                                   std::string(std::getenv("DSEEK_CUDA_SYNC_CHECKS")) == "1"};
#else
  static std::atomic<bool> enabled{true};
#endif
  return enabled;
}

inline void check_launch(cudaStream_t stream, const char* file, int line, const char* kernel) {
  check_cuda(cudaGetLastError(), file, line, kernel);
  if (synchronous_launch_checks().load(std::memory_order_relaxed))
    check_cuda(cudaStreamSynchronize(stream), file, line, kernel);
}

}  // namespace dseek::gpu

#define DSEEK_CUDA_CHECK(call) ::dseek::gpu::check_cuda((call), __FILE__, __LINE__, #call)
#define DSEEK_CUBLAS_CHECK(call) ::dseek::gpu::check_cublas((call), __FILE__, __LINE__, #call)
// After `kernel<<<grid, block, shared, stream>>>(...)`: DSEEK_CUDA_CHECK_LAUNCH(stream, "kernel").
#define DSEEK_CUDA_CHECK_LAUNCH(stream, kernel_name) \
  ::dseek::gpu::check_launch((stream), __FILE__, __LINE__, kernel_name)
