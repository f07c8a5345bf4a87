// Softmax and cross-entropy fused on the GPU, in place on the (N, V) logits buffer, as
// the CPU backend: forward turns logits into probabilities and per-row losses, backward
// turns probabilities into logit gradients. Forward is one block per row; its max and
// sum are block reductions in a fixed order (deterministic). Backward is element-wise.
//
// The vocabulary-parallel cross-entropy (Backend::vocab_parallel_*) is the same forward
// cut in three where the tensor group's all-reduces go, on a rank's (N, V / T) slice of
// the logits: the row maxima, then the exponentials and their sums (with the target's
// logit on the rank that holds it), then the probabilities and losses; one block per row
// for each. Its backward is the kernel above with the slice's first id.
#include <cfloat>
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

// Subtracts dloss at the target's column only where the slice that starts at
// `vocab_begin` holds it: j == target - vocab_begin cannot hold for a target outside
// [vocab_begin, vocab_begin + V), as 0 <= j < V.
__global__ void softmax_cross_entropy_backward_kernel(float* probs_to_dlogits,
                                                      const int32_t* targets, int vocab_begin,
                                                      int N, int V, float dloss) {
  const size_t total = static_cast<size_t>(N) * V;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t row = i / V;
    const int j = static_cast<int>(i % V);
    float value = probs_to_dlogits[i] * dloss;
    if (j == targets[row] - vocab_begin) value -= dloss;
    probs_to_dlogits[i] = value;
  }
}

// Block per row: max_slots[row, rank] = the maximum of the row's first V_real logits
// (the rest pad model.vocab beyond the data's ids), the other ranks' slots zero; a slice
// of padding only gives the lowest float, as the CPU backend does.
__global__ void vocab_parallel_logit_max_kernel(float* max_slots, const float* logits,
                                                int V_local, int V_real, int rank, int ranks) {
  __shared__ float shared[kWarpSize + 1];
  const float* row = logits + static_cast<size_t>(blockIdx.x) * V_local;
  float max_value = -INFINITY;
  for (int j = threadIdx.x; j < V_real; j += blockDim.x) max_value = fmaxf(max_value, row[j]);
  max_value = block_reduce(max_value, true, shared);
  if (V_real == 0) max_value = -FLT_MAX;
  float* slots = max_slots + static_cast<size_t>(blockIdx.x) * ranks;
  for (int k = threadIdx.x; k < ranks; k += blockDim.x) slots[k] = k == rank ? max_value : 0.0f;
}

// Block per row: m = the maximum of the row's slots; the row's first V_real logits
// become exp(logit - m) and the padding after them 0 (probability 0, so a zero
// gradient), sums[row] their sum, target_logits[row] = logit[target] - m where the slice
// holds the target, else 0.
__global__ void vocab_parallel_exp_sums_kernel(float* logits_to_exps, float* sums,
                                               float* target_logits, const float* max_slots,
                                               const int32_t* targets, int vocab_begin,
                                               int V_local, int V_real, int ranks) {
  __shared__ float shared[kWarpSize + 1];
  float* row = logits_to_exps + static_cast<size_t>(blockIdx.x) * V_local;
  const float* slots = max_slots + static_cast<size_t>(blockIdx.x) * ranks;
  float max_value = slots[0];
  for (int k = 1; k < ranks; ++k) max_value = fmaxf(max_value, slots[k]);
  const int target = targets[blockIdx.x] - vocab_begin;
  const bool held = target >= 0 && target < V_local;
  // Read before the row is overwritten below: the barrier orders every thread's writes
  // after this read.
  if (threadIdx.x == 0) target_logits[blockIdx.x] = held ? row[target] - max_value : 0.0f;
  __syncthreads();
  float total = 0.0f;
  for (int j = threadIdx.x; j < V_local; j += blockDim.x) {
    const float e = j < V_real ? expf(row[j] - max_value) : 0.0f;
    row[j] = e;
    total += e;
  }
  total = block_reduce(total, false, shared);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// Block per row: the exponentials divided by the group's sum, and the row's loss.
__global__ void vocab_parallel_softmax_loss_kernel(float* exps_to_probs, float* losses,
                                                   const float* sums, const float* target_logits,
                                                   int V_local) {
  float* row = exps_to_probs + static_cast<size_t>(blockIdx.x) * V_local;
  const float total = sums[blockIdx.x];
  const float inverse = 1.0f / total;
  for (int j = threadIdx.x; j < V_local; j += blockDim.x) row[j] *= inverse;
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(total) - target_logits[blockIdx.x];
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
  vocab_parallel_cross_entropy_backward(stream, probs_to_dlogits, targets, 0, V, N, dloss);
}

void vocab_parallel_logit_max(cudaStream_t stream, float* max_slots, const float* logits, int N,
                              int V_local, int V_real, int rank, int ranks) {
  if (N == 0) return;  // empty: a grid of 0 blocks would not launch
  vocab_parallel_logit_max_kernel<<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
      max_slots, logits, V_local, V_real, rank, ranks);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "vocab_parallel_logit_max_kernel");
}

void vocab_parallel_exp_sums(cudaStream_t stream, float* logits_to_exps, float* sums_and_targets,
                             const float* max_slots, const int32_t* targets, int vocab_begin,
                             int V_local, int V_real, int N, int ranks) {
  if (N == 0) return;
  vocab_parallel_exp_sums_kernel<<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
      logits_to_exps, sums_and_targets, sums_and_targets + N, max_slots, targets, vocab_begin,
      V_local, V_real, ranks);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "vocab_parallel_exp_sums_kernel");
}

void vocab_parallel_softmax_loss(cudaStream_t stream, float* exps_to_probs, float* losses,
                                 const float* sums_and_targets, int N, int V_local) {
  if (N == 0) return;
  vocab_parallel_softmax_loss_kernel<<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
      exps_to_probs, losses, sums_and_targets, sums_and_targets + N, V_local);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "vocab_parallel_softmax_loss_kernel");
}

void vocab_parallel_cross_entropy_backward(cudaStream_t stream, float* probs_to_dlogits,
                                           const int32_t* targets, int vocab_begin, int V_local,
                                           int N, float dloss) {
  const size_t n = static_cast<size_t>(N) * V_local;
  if (n == 0) return;
  softmax_cross_entropy_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      probs_to_dlogits, targets, vocab_begin, N, V_local, dloss);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "softmax_cross_entropy_backward_kernel");
}

}  // namespace dseek::gpu::kernels
