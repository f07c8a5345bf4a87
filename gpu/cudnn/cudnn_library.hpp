// cuDNN's graph API, loaded at run time (dlopen of libcudnn_graph.so.9), so that every
// dseek binary starts on a machine without cuDNN and its attention falls back to the
// tiled kernels there (cudnn_attention.hpp) instead of failing to load.
//
// Only the handful of entry points the backend graph API needs are resolved. Every call
// goes through DSEEK_CUDNN_CHECK, which names the file, the line, the status and
// cuDNN's own last error message, as cuda_check.hpp does for CUDA.
#pragma once

#include <cudnn_graph.h>

#include <string>

namespace dseek::gpu::cudnn {

struct Library {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) get_error_string = nullptr;
  decltype(&cudnnGetLastErrorString) get_last_error_string = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
};

// The process's one copy, loaded on first use. nullptr when cuDNN cannot be loaded;
// `why_not` (when given) then says what dlopen or dlsym reported.
const Library* library(std::string* why_not = nullptr);

// "file:line: CUDNN_STATUS_...: message in `call`", thrown as std::runtime_error.
[[noreturn]] void throw_cudnn_error(const Library& lib, cudnnStatus_t status, const char* file,
                                    int line, const char* call);

}  // namespace dseek::gpu::cudnn

// `lib` is a const Library&; `call` a member call such as lib.finalize(descriptor).
#define DSEEK_CUDNN_CHECK(lib, call)                                                   \
  do {                                                                                 \
    const cudnnStatus_t dseek_cudnn_status_ = (call);                                  \
    if (dseek_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                   \
      ::dseek::gpu::cudnn::throw_cudnn_error((lib), dseek_cudnn_status_, __FILE__,     \
                                             __LINE__, #call);                          \
  } while (0)
