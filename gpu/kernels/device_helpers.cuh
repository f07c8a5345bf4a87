// Small device-side helpers shared by the kernels in gpu/kernels/: grid sizes and the
// warp-level sum and max (a fixed butterfly order, so results are deterministic).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace dseek::gpu::kernels {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Blocks of `threads` covering `n` items, capped for grid-stride loops.
inline unsigned blocks_for(size_t n, int threads, size_t max_blocks = 65535u * 8u) {
  size_t blocks = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  if (blocks == 0) blocks = 1;
  return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
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
