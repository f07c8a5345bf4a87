// Softmax and cross-entropy fused on the GPU, in place on the (N, V) logits buffer, as
// the CPU backend: forward turns logits into probabilities and per-row losses, backward
// turns probabilities into logit gradients. Forward is one block per row; its max and
// sum are block reductions in a fixed order (deterministic). Backward is element-wise.
#include <cmath>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
constexpr int kThreads = 256;

// Reduces over the block (sum, or max when `take_max`); every thread gets the result.
// `shared` holds 33 floats; the trailing __syncthreads lets the caller reuse it at once.
__device__ float block_reduce(float value, bool take_max, float* shared) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = take_max ? warp_max(value) : warp_sum(value);
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  if (warp == 0) {
    float partial = lane < warps ? shared[lane] : (take_max ? -INFINITY : 0.0f);
    partial = take_max ? warp_max(partial) : warp_sum(partial);
    if (lane == 0) shared[kWarpSize] = partial;
  }
  __syncthreads();
  const float result = shared[kWarpSize];
  __syncthreads();
  return result;
}

__global__ void softmax_cross_entropy_forward_kernel(float* logits_to_probs, float* losses,
                                                     const int32_t* targets, int V) {
  __shared__ float shared[kWarpSize + 1];
  float* row = logits_to_probs + static_cast<size_t>(blockIdx.x) * V;
  // Read before block_reduce's barriers: after them, threads overwrite the row.
  const float target_logit = row[targets[blockIdx.x]];
  float max_value = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) max_value = fmaxf(max_value, row[j]);
  max_value = block_reduce(max_value, true, shared);
  float total = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float e = expf(row[j] - max_value);
    row[j] = e;
    total += e;
  }
  total = block_reduce(total, false, shared);
  const float inverse = 1.0f / total;
  for (int j = threadIdx.x; j < V; j += blockDim.x) row[j] *= inverse;
  // -log softmax from the logits, not from the rounded probability (as the CPU).
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(total) - (target_logit - max_value);
}

__global__ void softmax_cross_entropy_backward_kernel(float* probs_to_dlogits,
                                                      const int32_t* targets, int N, int V,
                                                      float dloss) {
  const size_t total = static_cast<size_t>(N) * V;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t row = i / V;
    const int j = static_cast<int>(i % V);
    float value = probs_to_dlogits[i] * dloss;
    if (j == targets[row]) value -= dloss;
    probs_to_dlogits[i] = value;
  }
}
}  // namespace

void softmax_cross_entropy_forward(cudaStream_t stream, float* logits_to_probs, float* losses,
                                   const int32_t* targets, int N, int V) {
  if (N == 0 || V == 0) return;  // empty: a grid of 0 blocks would not launch
  softmax_cross_entropy_forward_kernel<<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
      logits_to_probs, losses, targets, V);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "softmax_cross_entropy_forward_kernel");
}

void softmax_cross_entropy_backward(cudaStream_t stream, float* probs_to_dlogits,
                                    const int32_t* targets, int N, int V, float dloss) {
  const size_t n = static_cast<size_t>(N) * V;
  softmax_cross_entropy_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      probs_to_dlogits, targets, N, V, dloss);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "softmax_cross_entropy_backward_kernel");
}

}  // namespace dseek::gpu::kernels
