// LayerNorm on the GPU (eps 1e-5, as the CPU backend and PyTorch). Forward and the
// input gradient use one warp per row: the row's sums are warp reductions in a fixed
// order. The weight and bias gradients are sums over rows, done in two deterministic
// stages: each block of kRowsPerBlock rows writes its partial column sums to scratch,
// then one thread per column adds the partials in block order to dw and db.
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
constexpr float kEps = 1e-5f;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarpSize;

template <typename Out>  // float, or uint16_t: bf16 bits
__global__ void layernorm_forward_kernel(Out* out, float* mean, float* rstd, const float* inp,
                                         const float* w, const float* b, int N, int C) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;  // the whole warp leaves together
  const float* x = inp + static_cast<size_t>(row) * C;
  Out* y = out + static_cast<size_t>(row) * C;
  float total = 0.0f;
  for (int i = lane; i < C; i += kWarpSize) total += x[i];
  const float m = warp_sum(total) / C;
  float variance = 0.0f;
  for (int i = lane; i < C; i += kWarpSize) variance += (x[i] - m) * (x[i] - m);
  const float s = 1.0f / sqrtf(warp_sum(variance) / C + kEps);
  for (int i = lane; i < C; i += kWarpSize) store_activation(y + i, (x[i] - m) * s * w[i] + b[i]);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dinp += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd, per row.
__global__ void layernorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                                const float* w, const float* mean,
                                                const float* rstd, int N, int C) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;
  const size_t offset = static_cast<size_t>(row) * C;
  const float* x = inp + offset;
  const float* dy = dout + offset;
  float* dx = dinp + offset;
  const float m = mean[row], s = rstd[row];
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (int i = lane; i < C; i += kWarpSize) {
    const float norm = (x[i] - m) * s;
    const float dnorm = w[i] * dy[i];
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * norm;
  }
  dnorm_mean = warp_sum(dnorm_mean) / C;
  dnorm_norm_mean = warp_sum(dnorm_norm_mean) / C;
  for (int i = lane; i < C; i += kWarpSize) {
    const float norm = (x[i] - m) * s;
    const float dnorm = w[i] * dy[i];
    dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
  }
}

// Block (cx, ry): columns cx*kColumnThreads.., rows ry*kRowsPerBlock..; writes
// partial[ry][0][c] = sum norm*dy and partial[ry][1][c] = sum dy.
__global__ void layernorm_backward_partials_kernel(float* partial, const float* dout,
                                                   const float* inp, const float* mean,
                                                   const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * kRowsPerBlock;
  const int r1 = min(N, r0 + kRowsPerBlock);
  float dw = 0.0f, db = 0.0f;
  for (int r = r0; r < r1; ++r) {
    const size_t i = static_cast<size_t>(r) * C + c;
    const float norm = (inp[i] - mean[r]) * rstd[r];
    dw += norm * dout[i];
    db += dout[i];
  }
  float* block = partial + static_cast<size_t>(blockIdx.y) * 2 * C;
  block[c] = dw;
  block[C + c] = db;
}

__global__ void layernorm_backward_merge_kernel(float* dw, float* db, const float* partial,
                                                int blocks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sum_dw = 0.0f, sum_db = 0.0f;
  for (int k = 0; k < blocks; ++k) {
    sum_dw += partial[static_cast<size_t>(k) * 2 * C + c];
    sum_db += partial[static_cast<size_t>(k) * 2 * C + C + c];
  }
  dw[c] += sum_dw;
  db[c] += sum_db;
}
}  // namespace

template <typename Out>
void launch_layernorm_forward(cudaStream_t stream, Out* out, float* mean, float* rstd,
                              const float* inp, const float* w, const float* b, int N, int C) {
  if (N == 0 || C == 0) return;  // empty: a grid of 0 blocks would not launch
  const unsigned blocks = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  layernorm_forward_kernel<<<blocks, kThreads, 0, stream>>>(out, mean, rstd, inp, w, b, N, C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "layernorm_forward_kernel");
}

void layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd,
                       const float* inp, const float* w, const float* b, int N, int C) {
  launch_layernorm_forward(stream, out, mean, rstd, inp, w, b, N, C);
}

void layernorm_forward(cudaStream_t stream, uint16_t* out, float* mean, float* rstd,
                       const float* inp, const float* w, const float* b, int N, int C) {
  launch_layernorm_forward(stream, out, mean, rstd, inp, w, b, N, C);
}

size_t layernorm_backward_scratch_floats(int N, int C) {
  return static_cast<size_t>(row_blocks(N)) * 2 * static_cast<size_t>(C);
}

void layernorm_backward(cudaStream_t stream, Scratch scratch, float* dinp, float* dw, float* db,
                        const float* dout, const float* inp, const float* w, const float* mean,
                        const float* rstd, int N, int C) {
  if (N == 0 || C == 0) return;  // empty: a grid of 0 blocks would not launch
  check_rows(N, "layernorm_backward");
  const unsigned row_warps = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  layernorm_backward_input_kernel<<<row_warps, kThreads, 0, stream>>>(dinp, dout, inp, w, mean,
                                                                      rstd, N, C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "layernorm_backward_input_kernel");
  const dim3 grid((C + kColumnThreads - 1) / kColumnThreads, row_blocks(N));
  layernorm_backward_partials_kernel<<<grid, kColumnThreads, 0, stream>>>(scratch.data, dout, inp,
                                                                          mean, rstd, N, C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "layernorm_backward_partials_kernel");
  layernorm_backward_merge_kernel<<<grid.x, kColumnThreads, 0, stream>>>(dw, db, scratch.data,
                                                                         row_blocks(N), C);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "layernorm_backward_merge_kernel");
}

}  // namespace dseek::gpu::kernels
