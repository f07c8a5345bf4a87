// dst[c] += sum over rows of x[r, c] (the bias gradient of a linear layer), in two
// deterministic stages: blocks of kRowsPerBlock rows write partial column sums to
// scratch, then one thread per column adds them in block order. No float atomics.
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
__global__ void column_partials_kernel(float* partial, const float* x, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * kRowsPerBlock;
  const int r1 = min(N, r0 + kRowsPerBlock);
  float total = 0.0f;
  for (int r = r0; r < r1; ++r) total += x[static_cast<size_t>(r) * C + c];
  partial[static_cast<size_t>(blockIdx.y) * C + c] = total;
}

__global__ void column_merge_kernel(float* dst, const float* partial, int blocks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float total = 0.0f;
  for (int k = 0; k < blocks; ++k) total += partial[static_cast<size_t>(k) * C + c];
  dst[c] += total;
}
}  // namespace

size_t column_sums_scratch_floats(int N, int C) {
  return static_cast<size_t>(row_blocks(N)) * static_cast<size_t>(C);
}

void add_column_sums(cudaStream_t stream, Scratch scratch, float* dst, const float* x, int N,
                     int C) {
  if (N == 0 || C == 0) return;  // empty: a grid of 0 blocks would not launch
  check_rows(N, "add_column_sums");
  const dim3 grid((C + kColumnThreads - 1) / kColumnThreads, row_blocks(N));
  column_partials_kernel<<<grid, kColumnThreads, 0, stream>>>(scratch.data, x, N, C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "column_partials_kernel");
  column_merge_kernel<<<grid.x, kColumnThreads, 0, stream>>>(dst, scratch.data, row_blocks(N), C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "column_merge_kernel");
}

}  // namespace dseek::gpu::kernels
