// Token + position embeddings on the GPU, whole or a tensor-parallel rank's vocabulary
// slice of them (Backend::vocab_parallel_encoder_*: the rows [begin, begin + rows) of
// wte; the whole model's ops are the slice that holds every id). Forward is one thread
// per output element. Backward adds each token's gradient row into its embedding row; two
// positions may hold the same token, so to stay deterministic without atomics one thread
// owns one channel of the held tokens whose row in the slice is its bucket modulo
// kTokenBuckets, and walks the positions in order, as the CPU backend does (each dwte
// element is then summed in the CPU's order). The buckets give C * kTokenBuckets
// threads instead of C. dwpe is a sum over the batch per (t, c): one thread each.
#include <climits>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
// Whether the slice [vocab_begin, vocab_begin + vocab_rows) holds `token`.
__device__ __forceinline__ bool holds(int32_t token, int vocab_begin, int vocab_rows) {
  return token >= vocab_begin && token - vocab_begin < vocab_rows;
}

// wpe null: the token rows only (a tensor-parallel rank that does not add the positions).
__global__ void encoder_forward_kernel(float* out, const int32_t* tokens, const float* wte,
                                       const float* wpe, int vocab_begin, int vocab_rows,
                                       int B, int T, int C) {
  const size_t total = static_cast<size_t>(B) * T * C;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t row = i / C;  // b * T + t
    const size_t c = i % C;
    const size_t t = row % T;
    const int32_t token = tokens[row];
    const bool held = holds(token, vocab_begin, vocab_rows);
    const float position = wpe != nullptr ? wpe[t * C + c] : 0.0f;
    if (!held) {
      out[i] = position;
      continue;
    }
    const float embedding = wte[static_cast<size_t>(token - vocab_begin) * C + c];
    // The sum only where there is one: embedding + 0.0f would turn a -0.0f into +0.0f,
    // which the CPU's copy keeps.
    out[i] = wpe != nullptr ? embedding + position : embedding;
  }
}

constexpr int kTokenBuckets = 32;

// Thread (c, bucket): dwte[tokens[r] - vocab_begin, c] += dout[r, c] for r in order, for
// the held tokens with (tokens[r] - vocab_begin) % kTokenBuckets == bucket (blockIdx.y).
// Each dwte element has exactly one owning thread: no two threads write it.
__global__ void encoder_backward_wte_kernel(float* dwte, const float* dout,
                                            const int32_t* tokens, int vocab_begin,
                                            int vocab_rows, int rows, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int bucket = static_cast<int>(blockIdx.y);
  for (int r = 0; r < rows; ++r) {
    const int32_t token = tokens[r];
    if (!holds(token, vocab_begin, vocab_rows)) continue;
    const int local = token - vocab_begin;
    if (local % kTokenBuckets != bucket) continue;
    dwte[static_cast<size_t>(local) * C + c] += dout[static_cast<size_t>(r) * C + c];
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
  // Every id (the whole model knows no vocabulary size here): INT_MAX rows from 0.
  vocab_parallel_encoder_forward(stream, out, tokens, wte, wpe, 0, INT_MAX, B, T, C);
}

void encoder_backward(cudaStream_t stream, float* dwte, float* dwpe, const float* dout,
                      const int32_t* tokens, int B, int T, int C) {
  vocab_parallel_encoder_backward(stream, dwte, dwpe, dout, tokens, 0, INT_MAX, B, T, C);
}

void vocab_parallel_encoder_forward(cudaStream_t stream, float* out, const int32_t* tokens,
                                    const float* wte_slice, const float* wpe, int vocab_begin,
                                    int vocab_rows, int B, int T, int C) {
  constexpr int kThreads = 256;
  const size_t n = static_cast<size_t>(B) * T * C;
  if (n == 0) return;  // empty: nothing to write
  encoder_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      out, tokens, wte_slice, wpe, vocab_begin, vocab_rows, B, T, C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "encoder_forward_kernel");
}

void vocab_parallel_encoder_backward(cudaStream_t stream, float* dwte_slice, float* dwpe,
                                     const float* dout, const int32_t* tokens, int vocab_begin,
                                     int vocab_rows, int B, int T, int C) {
  if (B == 0 || T == 0 || C == 0) return;  // empty: a grid of 0 blocks would not launch
  constexpr int kThreads = 128;
  const dim3 wte_grid(blocks_for(static_cast<size_t>(C), kThreads), kTokenBuckets);
  encoder_backward_wte_kernel<<<wte_grid, kThreads, 0, stream>>>(dwte_slice, dout, tokens,
                                                                 vocab_begin, vocab_rows, B * T,
                                                                 C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "encoder_backward_wte_kernel");
  const size_t n = static_cast<size_t>(T) * C;
  encoder_backward_wpe_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(dwpe, dout, B, T,
                                                                                C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "encoder_backward_wpe_kernel");
}

}  // namespace dseek::gpu::kernels
