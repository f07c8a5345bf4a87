// Small device-side helpers shared by the kernels in gpu/kernels/: grid sizes and the
// warp-level sum and max (a fixed butterfly order, so results are deterministic).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace dseek::gpu::kernels {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// An activation stored as fp32, or as bf16 bits (bf16 activations, backend.hpp).
__device__ __forceinline__ void store_activation(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_activation(uint16_t* p, float v) {
  *p = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// x as a product's operand: rounded to bf16 (nearest even, numerics/bf16.hpp's rounding)
// when `bf16`, else unchanged. Attention's products under train.precision = "bf16".
__device__ __forceinline__ float product_operand(float x, bool bf16) {
  return bf16 ? __bfloat162float(__float2bfloat16_rn(x)) : x;
}

// Blocks of `threads` covering `n` items, capped for grid-stride loops.
inline unsigned blocks_for(size_t n, int threads, size_t max_blocks = 65535u * 8u) {
  size_t blocks = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  if (blocks == 0) blocks = 1;
  return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

// Column reductions (the bias and LayerNorm parameter gradients) sum blocks of
// kRowsPerBlock rows, one block per grid y index, then the blocks in order.
constexpr int kRowsPerBlock = 64;
constexpr int kColumnThreads = 128;

inline int row_blocks(int N) { return (N + kRowsPerBlock - 1) / kRowsPerBlock; }

// The row blocks are the grid's y dimension, at most 65535 of them.
inline void check_rows(int N, const char* op) {
  if (row_blocks(N) > 65535)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(N) +
                                " rows exceed the kernel's limit of " +
                                std::to_string(65535 * kRowsPerBlock));
}

// Tree sum in double of one value per thread of a block of kThreads (a power of two);
// `shared` holds kThreads doubles; every thread gets the block's total. A fixed order.
template <int kThreads>
__device__ double block_tree_sum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  return shared[0];
}

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

}  // namespace dseek::gpu::kernels
