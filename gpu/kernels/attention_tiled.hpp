// The tiled causal attention kernels (attention_tiled.cu): the path attention.cu takes for
// head sizes up to 64. Same layouts and numerics as attention.cu's kernels (see there).
#pragma once

#include <cuda_runtime.h>

namespace dseek::gpu::kernels {

// Whether the tiled kernels take this shape (head size C / NH at most 64, B * NH at most
// 65535 blocks in the grid's y dimension).
bool tiled_attention_handles(int B, int T, int C, int NH);

void tiled_attention_forward(cudaStream_t stream, float* out, float* logsumexp, const float* qkv,
                             int B, int T, int C, int NH, bool bf16);

// out: what the forward wrote (D_t = dout_t . out_t); dsum: B * NH * T floats of scratch
// (D_t, computed first, read by both passes).
void tiled_attention_backward(cudaStream_t stream, float* dsum, float* dqkv, const float* dout,
                              const float* qkv, const float* out, const float* logsumexp, int B,
                              int T, int C, int NH, bool bf16);

}  // namespace dseek::gpu::kernels
