// The conversion kernels of precision_convert.hpp. Element-wise passes are grid-stride
// loops; the amax reduction keeps a per-thread maximum, reduces it across the block and
// does one atomicMax per block (on the float's bits: for non-negative floats the integer
// order is the float order).
#include "gpu/precision_convert.hpp"

#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>
#include <stdexcept>

#include "gpu/cuda_check.hpp"

namespace dseek::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kTile = 32;  // transpose tile: kTile x kTile elements, kTile x 8 threads

int blocks_for(size_t n, size_t max_blocks = 65535 * 8) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::min<size_t>(std::max<size_t>(blocks, 1), max_blocks));
}
// Kernels that also reduce an amax run a grid-stride loop over at most this many blocks
// (about what an H200's 132 multiprocessors hold at once): one atomic per block.
constexpr size_t kMaxAmaxBlocks = 1024;

__nv_fp8_interpretation_t interpretation(Fp8Format format) {
  return format == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
}

// The block's largest `value` into *amax: a warp max, the warps' maxima through shared
// memory, then one atomicMax per block. (One atomic per warp, as first written, put
// ~400k atomics on one address per large tensor: 0.3 ms for a 12M-element quantize on an
// H200, 100x its memory time.) Every thread of the block must call it.
__device__ __forceinline__ void block_max_into(float* amax, float value) {
  __shared__ float warp_max[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  const int thread = threadIdx.x + threadIdx.y * blockDim.x;
  const int warps = (blockDim.x * blockDim.y + 31) / 32;
  if (thread % 32 == 0) warp_max[thread / 32] = value;
  __syncthreads();
  if (thread == 0) {
    float block_max = 0.0f;
    for (int w = 0; w < warps; ++w) block_max = fmaxf(block_max, warp_max[w]);
    if (block_max > 0.0f) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(block_max));
  }
}

__global__ void to_bf16_kernel(__nv_bfloat16* out, const float* in, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void from_bf16_kernel(float* out, const __nv_bfloat16* in, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

// As the CPU reference (runtime/numerics/fp8.hpp): E4M3 saturates to +-448, E5M2 does
// NOT -- a gradient beyond 57344 becomes Inf, so the loss scaler sees the overflow and
// skips the step instead of training on clipped gradients.
__device__ __forceinline__ __nv_saturation_t saturation_of(__nv_fp8_interpretation_t format) {
  return format == __NV_E5M2 ? __NV_NOSAT : __NV_SATFINITE;
}

__global__ void quantize_kernel(__nv_fp8_storage_t* out, __nv_fp8_interpretation_t format,
                                const float* in, size_t n, const float* scale, float* amax) {
  const float s = *scale;
  float local_max = 0.0f;
  // Every thread of a warp runs the shuffle below, also those past the end.
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float x = in[i];
    local_max = fmaxf(local_max, fabsf(x));
    out[i] = __nv_cvt_float_to_fp8(x * s, saturation_of(format), format);
  }
  block_max_into(amax, local_max);
}

// Block (kTile, 8): reads a kTile x kTile tile of `in` row by row (coalesced), writes it
// transposed through shared memory (coalesced again).
__global__ void quantize_transpose_kernel(__nv_fp8_storage_t* out_t,
                                          __nv_fp8_interpretation_t format, const float* in,
                                          int rows, int cols, const float* scale, float* amax) {
  __shared__ float tile[kTile][kTile + 1];
  const float s = *scale;
  float local_max = 0.0f;
  const int col = blockIdx.x * kTile + threadIdx.x;
  for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
    const int row = blockIdx.y * kTile + dy;
    float x = 0.0f;
    if (row < rows && col < cols) x = in[size_t(row) * cols + col];
    tile[dy][threadIdx.x] = x;
    local_max = fmaxf(local_max, fabsf(x));
  }
  __syncthreads();
  const int out_col = blockIdx.y * kTile + threadIdx.x;  // a row of `in`
  for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
    const int out_row = blockIdx.x * kTile + dy;  // a column of `in`
    if (out_row < cols && out_col < rows)
      out_t[size_t(out_row) * rows + out_col] =
          __nv_cvt_float_to_fp8(tile[threadIdx.x][dy] * s, saturation_of(format), format);
  }
  block_max_into(amax, local_max);
}

__global__ void dequantize_kernel(float* out, const __nv_fp8_storage_t* in,
                                  __nv_fp8_interpretation_t format, size_t n,
                                  const float* scale_inv) {
  const float s = *scale_inv;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(in[i], format))) * s;
}

__global__ void scale_kernel(float* scale, float* scale_inv, const float* amax, float max_value,
                             int margin) {
  const float a = *amax;
  float s = 1.0f;
  if (a > 0.0f && isfinite(a)) s = max_value / a / exp2f(static_cast<float>(margin));
  // A tiny amax (e.g. a denormal) overflows the quotient to inf, and quantizing with an
  // infinite scale turns every zero of the tensor into 0 * inf = NaN: clamp to the
  // largest finite float instead (Transformer Engine does the same).
  if (!isfinite(s)) s = FLT_MAX;
  *scale = s;
  *scale_inv = 1.0f / s;
}

}  // namespace

float fp8_max(Fp8Format format) { return format == Fp8Format::e4m3 ? 448.0f : 57344.0f; }

void convert_to_bf16(__nv_bfloat16* out, const float* in, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, in, n);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "to_bf16_kernel");
}

void convert_bf16_to_float(float* out, const __nv_bfloat16* in, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  from_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, in, n);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "from_bf16_kernel");
}

void quantize_to_fp8(void* out, Fp8Format format, const float* in, size_t n, const float* scale,
                     float* amax, cudaStream_t stream) {
  if (n == 0) return;
  quantize_kernel<<<blocks_for(n, kMaxAmaxBlocks), kThreads, 0, stream>>>(
      static_cast<__nv_fp8_storage_t*>(out), interpretation(format), in, n, scale, amax);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "quantize_kernel");
}

void quantize_transpose_to_fp8(void* out_t, Fp8Format format, const float* in, int rows,
                               int cols, const float* scale, float* amax, cudaStream_t stream) {
  if (rows < 0 || cols < 0)
    throw std::invalid_argument("quantize_transpose_to_fp8: negative shape");
  if (rows == 0 || cols == 0) return;
  const dim3 block(kTile, 8);
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
  if (grid.y > 65535)
    throw std::invalid_argument("quantize_transpose_to_fp8: rows > 65535 * 32 are not supported");
  quantize_transpose_kernel<<<grid, block, 0, stream>>>(
      static_cast<__nv_fp8_storage_t*>(out_t), interpretation(format), in, rows, cols, scale,
      amax);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "quantize_transpose_kernel");
}

void dequantize_fp8(float* out, const void* in, Fp8Format format, size_t n,
                    const float* scale_inv, cudaStream_t stream) {
  if (n == 0) return;
  dequantize_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      out, static_cast<const __nv_fp8_storage_t*>(in), interpretation(format), n, scale_inv);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "dequantize_kernel");
}

void fp8_scale_from_amax(float* scale, float* scale_inv, const float* amax, Fp8Format format,
                         int margin, cudaStream_t stream) {
  scale_kernel<<<1, 1, 0, stream>>>(scale, scale_inv, amax, fp8_max(format), margin);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "scale_kernel");
}

}  // namespace dseek::gpu
