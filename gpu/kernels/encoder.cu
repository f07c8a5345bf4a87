// Token + position embeddings on the GPU. Forward is one thread per output element.
// Backward adds each token's gradient row into its embedding row; two positions may
// hold the same token, so to stay deterministic without atomics one thread owns one
// channel of the tokens whose id is its bucket modulo kTokenBuckets, and walks the
// positions in order, as the CPU backend does (each dwte element is then summed in the
// CPU's order). The buckets give C * kTokenBuckets threads instead of C. dwpe is a sum
// over the batch per (t, c): one thread each.
#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
__global__ void encoder_forward_kernel(float* out, const int32_t* tokens, const float* wte,
                                       const float* wpe, int B, int T, int C) {
  const size_t total = static_cast<size_t>(B) * T * C;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t row = i / C;  // b * T + t
    const size_t c = i % C;
    const size_t t = row % T;
    out[i] = wte[static_cast<size_t>(tokens[row]) * C + c] + wpe[t * C + c];
  }
}

constexpr int kTokenBuckets = 32;

// Thread (c, bucket): dwte[tokens[r], c] += dout[r, c] for r in order, for the tokens
// with tokens[r] % kTokenBuckets == bucket (blockIdx.y).
__global__ void encoder_backward_wte_kernel(float* dwte, const float* dout,
                                            const int32_t* tokens, int rows, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int bucket = static_cast<int>(blockIdx.y);
  for (int r = 0; r < rows; ++r) {
    const int32_t token = tokens[r];
    if (token % kTokenBuckets != bucket) continue;
    dwte[static_cast<size_t>(token) * C + c] += dout[static_cast<size_t>(r) * C + c];
  }
}

// One thread per (t, c): dwpe[t, c] += sum over b of dout[b, t, c], b in order.
__global__ void encoder_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T,
                                            int C) {
  const size_t total = static_cast<size_t>(T) * C;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float value = dwpe[i];
    for (int b = 0; b < B; ++b) value += dout[static_cast<size_t>(b) * total + i];
    dwpe[i] = value;
  }
}
}  // namespace

void encoder_forward(cudaStream_t stream, float* out, const int32_t* tokens, const float* wte,
                     const float* wpe, int B, int T, int C) {
  constexpr int kThreads = 256;
  const size_t n = static_cast<size_t>(B) * T * C;
  encoder_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, tokens, wte, wpe,
                                                                           B, T, C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "encoder_forward_kernel");
}

void encoder_backward(cudaStream_t stream, float* dwte, float* dwpe, const float* dout,
                      const int32_t* tokens, int B, int T, int C) {
  if (B == 0 || T == 0 || C == 0) return;  // empty: a grid of 0 blocks would not launch
  constexpr int kThreads = 128;
  const dim3 wte_grid(blocks_for(static_cast<size_t>(C), kThreads), kTokenBuckets);
  encoder_backward_wte_kernel<<<wte_grid, kThreads, 0, stream>>>(dwte, dout, tokens, B * T, C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "encoder_backward_wte_kernel");
  const size_t n = static_cast<size_t>(T) * C;
  encoder_backward_wpe_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(dwpe, dout, B, T,
                                                                                C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "encoder_backward_wpe_kernel");
}

}  // namespace dseek::gpu::kernels
