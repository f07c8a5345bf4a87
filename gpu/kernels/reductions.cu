// Sum and sum of squares of a float array, accumulated in double on the GPU. A fixed
// grid of kBlocks x kThreads threads (whatever n is) sums grid-strided elements; each
// block reduces its threads by a shared-memory tree into partials[block]; one block
// then reduces the partials the same way. The order depends only on n: deterministic.
#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
constexpr int kBlocks = 256;
constexpr int kThreads = 256;

__global__ void partial_sums_kernel(double* partials, const float* x, size_t n, bool squares) {
  __shared__ double shared[kThreads];
  double total = 0.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<size_t>(kBlocks) * kThreads) {
    const double value = x[i];
    total += squares ? value * value : value;
  }
  total = block_tree_sum<kThreads>(total, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void final_sum_kernel(double* result, const double* partials) {
  __shared__ double shared[kThreads];
  static_assert(kBlocks == kThreads, "one thread per partial");
  const double total = block_tree_sum<kThreads>(partials[threadIdx.x], shared);
  if (threadIdx.x == 0) *result = total;
}
}  // namespace

int reduction_partials() { return kBlocks; }

void sum(cudaStream_t stream, double* partials, double* result, const float* x, size_t n,
         bool squares) {
  partial_sums_kernel<<<kBlocks, kThreads, 0, stream>>>(partials, x, n, squares);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "partial_sums_kernel");
  final_sum_kernel<<<1, kThreads, 0, stream>>>(result, partials);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "final_sum_kernel");
}

}  // namespace dseek::gpu::kernels
