// Causal multi-head attention on the GPU, flash-attention style: the T x T probabilities
// are never stored. Forward keeps, per query row, the logsumexp of its scaled scores
// (B*NH*T floats); backward recomputes each probability as exp(score - logsumexp).
//
// Head sizes up to 64 (GPT-2's) take the tiled kernels of attention_tiled.cu (11x faster
// on an H200 for GPT-2 124M: 37 against 428 ms of attention over two steps at batch 4).
// The kernels here handle the rest: one warp per query row (forward, dq) or per
// key row (dk, dv); a score is a warp reduction of q.k over the head's channels, which
// each lane holds in registers at d = lane + 32*k (so head sizes up to kMaxHeadSize).
// Every sum runs in a fixed order: no atomics, deterministic. Under bf16 every product's
// operands are rounded to bf16 where they are read (product_operand).
//
// Layouts (as the CPU backend): qkv (B, T, 3C) with q | k | v and head h at channels
// h*hs .. h*hs+hs-1 of each; out (B, T, C); logsumexp[(b*NH + h)*T + t].
// Backward, with P the probabilities, dP = dO V^T and D_t = sum_j P_tj dP_tj:
//   dS_tj = P_tj (dP_tj - D_t) * scale,  dQ = dS K,  dK = dS^T Q,  dV = P^T dO.
// Pass one (per query row) computes D_t into scratch and then dq; pass two (per key
// row j) walks the queries t >= j for dk and dv.
#include <cmath>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/attention_tiled.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
constexpr int kPerLane = kMaxHeadSize / kWarpSize;
constexpr int kThreads = 128;
constexpr int kWarpsPerBlock = kThreads / kWarpSize;

// The (b, h, t) row a warp handles: warps enumerate rows as ((b * NH) + h) * T + t.
struct HeadRow {
  int b, h, t;
  bool valid;
};

__device__ __forceinline__ HeadRow head_row(int B, int T, int NH) {
  const long long row =
      static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  HeadRow r;
  r.valid = row < static_cast<long long>(B) * NH * T;
  r.t = static_cast<int>(row % T);
  const long long bh = row / T;
  r.h = static_cast<int>(bh % NH);
  r.b = static_cast<int>(bh / NH);
  return r;
}

// Offset of token (b, t)'s q vector of head h inside qkv; k and v follow at +C, +2C.
__device__ __forceinline__ size_t qkv_offset(int b, int t, int h, int T, int C, int hs) {
  return (static_cast<size_t>(b) * T + t) * 3 * C + static_cast<size_t>(h) * hs;
}

__device__ __forceinline__ size_t out_offset(int b, int t, int h, int T, int C, int hs) {
  return (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * hs;
}

__device__ __forceinline__ void load_head(float (&dst)[kPerLane], const float* src, int lane,
                                          int hs, bool bf16) {
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + k * kWarpSize;
    dst[k] = d < hs ? product_operand(src[d], bf16) : 0.0f;
  }
}

// The dot product of a register-held head vector with one in memory, summed over the warp.
__device__ __forceinline__ float warp_dot(const float (&a)[kPerLane], const float* b, int lane,
                                          int hs, bool bf16) {
  float partial = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + k * kWarpSize;
    if (d < hs) partial += a[k] * product_operand(b[d], bf16);
  }
  return warp_sum(partial);
}

__global__ void attention_forward_kernel(float* out, float* logsumexp, const float* qkv, int B,
                                         int T, int C, int NH, bool bf16) {
  const HeadRow r = head_row(B, T, NH);
  if (!r.valid) return;  // the whole warp leaves together
  const int lane = threadIdx.x % kWarpSize;
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  float q[kPerLane], acc[kPerLane];
  load_head(q, qkv + qkv_offset(r.b, r.t, r.h, T, C, hs), lane, hs, bf16);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) acc[k] = 0.0f;
  // Online softmax: running max m, running sum l of exp(s - m), acc = sum exp(s - m) v.
  float m = -INFINITY, l = 0.0f;
  for (int j = 0; j <= r.t; ++j) {
    const float* key = qkv + qkv_offset(r.b, j, r.h, T, C, hs) + C;
    const float* value = key + C;
    const float s = warp_dot(q, key, lane, hs, bf16) * scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + k * kWarpSize;
      if (d < hs)
        acc[k] = acc[k] * correction +
                 product_operand(p, bf16) * product_operand(value[d], bf16);
    }
    m = m_new;
  }
  float* o = out + out_offset(r.b, r.t, r.h, T, C, hs);
  const float inverse = 1.0f / l;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + k * kWarpSize;
    if (d < hs) o[d] = acc[k] * inverse;
  }
  if (lane == 0)
    logsumexp[(static_cast<size_t>(r.b) * NH + r.h) * T + r.t] = m + logf(l);
}

// Per query row t: D_t into `dsum`, then dq_t = sum_j dS_tj k_j (overwrite).
__global__ void attention_backward_query_kernel(float* dqkv, float* dsum, const float* dout,
                                                const float* qkv, const float* logsumexp, int B,
                                                int T, int C, int NH, bool bf16) {
  const HeadRow r = head_row(B, T, NH);
  if (!r.valid) return;
  const int lane = threadIdx.x % kWarpSize;
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const size_t row = (static_cast<size_t>(r.b) * NH + r.h) * T + r.t;
  const float lse = logsumexp[row];
  float q[kPerLane], dO[kPerLane], dq[kPerLane];
  load_head(q, qkv + qkv_offset(r.b, r.t, r.h, T, C, hs), lane, hs, bf16);
  load_head(dO, dout + out_offset(r.b, r.t, r.h, T, C, hs), lane, hs, bf16);
  float D = 0.0f;
  for (int j = 0; j <= r.t; ++j) {
    const float* key = qkv + qkv_offset(r.b, j, r.h, T, C, hs) + C;
    const float* value = key + C;
    const float p = expf(warp_dot(q, key, lane, hs, bf16) * scale - lse);
    D += p * warp_dot(dO, value, lane, hs, bf16);
  }
  if (lane == 0) dsum[row] = D;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) dq[k] = 0.0f;
  for (int j = 0; j <= r.t; ++j) {
    const float* key = qkv + qkv_offset(r.b, j, r.h, T, C, hs) + C;
    const float* value = key + C;
    const float p = expf(warp_dot(q, key, lane, hs, bf16) * scale - lse);
    const float ds = p * (warp_dot(dO, value, lane, hs, bf16) - D) * scale;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + k * kWarpSize;
      if (d < hs) dq[k] += product_operand(ds, bf16) * product_operand(key[d], bf16);
    }
  }
  float* dq_out = dqkv + qkv_offset(r.b, r.t, r.h, T, C, hs);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + k * kWarpSize;
    if (d < hs) dq_out[d] = dq[k];
  }
}

// Per key row j: dk_j = sum_{t>=j} dS_tj q_t and dv_j = sum_{t>=j} P_tj dO_t (overwrite).
__global__ void attention_backward_key_kernel(float* dqkv, const float* dsum, const float* dout,
                                              const float* qkv, const float* logsumexp, int B,
                                              int T, int C, int NH, bool bf16) {
  const HeadRow r = head_row(B, T, NH);  // r.t is the key index j here
  if (!r.valid) return;
  const int lane = threadIdx.x % kWarpSize;
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const size_t head_rows = (static_cast<size_t>(r.b) * NH + r.h) * T;
  const int j = r.t;
  float key[kPerLane], value[kPerLane], dk[kPerLane], dv[kPerLane];
  load_head(key, qkv + qkv_offset(r.b, j, r.h, T, C, hs) + C, lane, hs, bf16);
  load_head(value, qkv + qkv_offset(r.b, j, r.h, T, C, hs) + 2 * C, lane, hs, bf16);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) dk[k] = dv[k] = 0.0f;
  for (int t = j; t < T; ++t) {
    const float* q = qkv + qkv_offset(r.b, t, r.h, T, C, hs);
    const float* dO = dout + out_offset(r.b, t, r.h, T, C, hs);
    const float p = expf(warp_dot(key, q, lane, hs, bf16) * scale - logsumexp[head_rows + t]);
    const float ds = p * (warp_dot(value, dO, lane, hs, bf16) - dsum[head_rows + t]) * scale;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + k * kWarpSize;
      if (d < hs) {
        dk[k] += product_operand(ds, bf16) * product_operand(q[d], bf16);
        dv[k] += product_operand(p, bf16) * product_operand(dO[d], bf16);
      }
    }
  }
  float* dk_out = dqkv + qkv_offset(r.b, j, r.h, T, C, hs) + C;
  float* dv_out = dk_out + C;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + k * kWarpSize;
    if (d < hs) {
      dk_out[d] = dk[k];
      dv_out[d] = dv[k];
    }
  }
}

unsigned blocks_for_rows(int B, int T, int NH) {
  const size_t rows = static_cast<size_t>(B) * NH * T;
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}
}  // namespace

size_t attention_state_floats(int B, int T, int NH) {
  return static_cast<size_t>(B) * NH * T;  // one logsumexp per query row and head
}

void attention_forward(cudaStream_t stream, float* out, float* logsumexp, const float* qkv, int B,
                       int T, int C, int NH, bool bf16) {
  if (B == 0 || T == 0 || NH == 0) return;  // empty: a grid of 0 blocks would not launch
  if (tiled_attention_handles(B, T, C, NH))
    return tiled_attention_forward(stream, out, logsumexp, qkv, B, T, C, NH, bf16);
  attention_forward_kernel<<<blocks_for_rows(B, T, NH), kThreads, 0, stream>>>(out, logsumexp,
                                                                               qkv, B, T, C, NH, bf16);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "attention_forward_kernel");
}

size_t attention_backward_scratch_floats(int B, int T, int NH) {
  return static_cast<size_t>(B) * NH * T;
}

void attention_backward(cudaStream_t stream, Scratch scratch, float* dqkv, const float* dout,
                        const float* qkv, const float* out, const float* logsumexp, int B, int T,
                        int C, int NH, bool bf16) {
  if (B == 0 || T == 0 || NH == 0) return;  // empty: a grid of 0 blocks would not launch
  if (tiled_attention_handles(B, T, C, NH))
    return tiled_attention_backward(stream, scratch.data, dqkv, dout, qkv, out, logsumexp, B, T,
                                    C, NH, bf16);
  attention_backward_query_kernel<<<blocks_for_rows(B, T, NH), kThreads, 0, stream>>>(
      dqkv, scratch.data, dout, qkv, logsumexp, B, T, C, NH, bf16);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "attention_backward_query_kernel");
  attention_backward_key_kernel<<<blocks_for_rows(B, T, NH), kThreads, 0, stream>>>(
      dqkv, scratch.data, dout, qkv, logsumexp, B, T, C, NH, bf16);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "attention_backward_key_kernel");
}

}  // namespace dseek::gpu::kernels
