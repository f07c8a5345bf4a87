// Causal self-attention through cuDNN's fused flash attention (scaled dot product
// attention, forward and backward), for train.precision = "bf16" on CUDA: the same op as
// Backend::attention_forward / attention_backward, on the same (B, T, 3C) qkv layout.
//
// cuDNN takes bf16 tensors: Q, K, V, the output and its gradient are rounded to bf16 on
// the way in (the products' operands, as the tiled kernels and the CPU round them under
// bf16) and the output and dqkv come back as bf16 values in fp32 buffers. Softmax,
// its logsumexp (the attention state: B x NH x T floats, as the tiled kernels keep) and
// the products' accumulation are fp32. The backward runs cuDNN's deterministic variant
// (dQ without atomics), so a step's gradients repeat bit for bit.
//
// Built without cuDNN's headers, or where libcudnn_graph.so.9 cannot be loaded, create()
// returns nullptr and says why; CudaBackend then runs its tiled kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace dseek::gpu {

class CudnnAttention {
 public:
  struct Memory {  // device memory in the backend's stream order
    std::function<void*(size_t bytes)> allocate;
    std::function<void(void*)> release;
  };

  static std::unique_ptr<CudnnAttention> create(cudaStream_t stream, Memory memory,
                                                std::string* why_not);
  virtual ~CudnnAttention() = default;

  // "cuDNN 9.19.0": the library that runs.
  virtual std::string version() const = 0;
  // Whether the fused kernels run this shape: a head size that is a multiple of 8 and at
  // most 128, and both plans built (on the first call for the shape; the answer is kept).
  // When not, `why_not` says why.
  virtual bool prepare(int B, int T, int C, int NH, std::string* why_not) = 0;
  // Only for shapes prepare() accepted. stats: B * NH * T floats (logsumexp per row).
  virtual void forward(float* out, float* stats, const float* qkv, int B, int T, int C,
                       int NH) = 0;
  // dqkv is overwritten.
  virtual void backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* stats, int B, int T, int C, int NH) = 0;
};

}  // namespace dseek::gpu
