// Causal attention in 64 x 64 tiles through shared memory, for head sizes up to 64 (GPT-2's
// is 64): the fast path of attention.cu, which keeps its warp-per-row kernels for larger
// heads. Same numerics contract: fp32 throughout, the probabilities never stored, per row
// the logsumexp saved; every sum in a fixed order (no atomics), so results are
// deterministic, and they agree with the CPU backend to fp32 rounding.
//
// Why tiles: the warp-per-row kernels read every key and value once per query row from
// global memory and reduce each score across a warp; on an H200 they took 87% of a GPT-2
// 124M training step (ncu, 2026-11-30). Here a block of 256 threads loads a tile of 64
// queries and, in turn, tiles of 64 keys and values into shared memory, and each thread
// computes a 4 x 4 block of every 64 x 64 product from there.
//
// Thread layout: thread (ty, tx) = (tid / 16, tid % 16) owns rows ty + 16 i and columns
// tx + 16 j (i, j < 4) of a tile product; a row's 16 threads are one half-warp, so a row
// max or sum is a 4-step butterfly. Tiles are stored with a row stride of 65 floats so
// that 16 threads reading one column of 16 rows hit 16 different banks.
//
// Backward (P the probabilities, dP = dO V^T, D_t = sum_j P_tj dP_tj,
// dS = P (dP - D) * scale): one kernel per query tile computes D and dQ = dS K (two passes
// over the key tiles); one kernel per key tile walks the query tiles below the diagonal
// for dK = dS^T Q and dV = P^T dO.
#include <cmath>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/attention_tiled.hpp"
#include "gpu/kernels/device_helpers.cuh"

namespace dseek::gpu::kernels {

namespace {

constexpr int kTile = 64;                       // rows of a query or key tile
constexpr int kStride = kTile + 1;              // floats per stored tile row (see the top)
constexpr int kTileFloats = kTile * kStride;
constexpr int kThreads = 256;                   // 16 x 16 threads, each 4 x 4 of a tile
constexpr int kPer = 4;                         // rows (and columns) per thread

using Block4 = float[kPer][kPer];

struct Head {
  int b, h;
};

__device__ __forceinline__ Head block_head(int NH) {
  return {static_cast<int>(blockIdx.y) / NH, static_cast<int>(blockIdx.y) % NH};
}

// Rows row0 .. row0+63 of one head's vectors into `tile`; `base` points at row 0, dimension
// 0 of that head, rows `row_stride` floats apart. Rows past T and dimensions past hs are 0.
__device__ void load_tile(float* tile, const float* base, size_t row_stride, int row0, int T,
                          int hs) {
  for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
    const int r = i / kTile, d = i % kTile;
    tile[r * kStride + d] =
        (row0 + r < T && d < hs) ? base[static_cast<size_t>(row0 + r) * row_stride + d] : 0.0f;
  }
}

// acc[i][j] = sum_d A[ty+16i][d] * B[tx+16j][d]   (A B^T: scores, dP)
__device__ __forceinline__ void product_abt(Block4& acc, const float* A, const float* B, int ty,
                                            int tx, int depth) {
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[i][j] = 0.0f;
  for (int d = 0; d < depth; ++d) {
    float a[kPer], b[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) a[i] = A[(ty + 16 * i) * kStride + d];
#pragma unroll
    for (int j = 0; j < kPer; ++j) b[j] = B[(tx + 16 * j) * kStride + d];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[i][j] += a[i] * b[j];
  }
}

// acc[i][j] += sum_c A[ty+16i][c] * B[c][tx+16j]   (A B: P V, dS K)
__device__ __forceinline__ void accumulate_ab(Block4& acc, const float* A, const float* B, int ty,
                                              int tx) {
  for (int c = 0; c < kTile; ++c) {
    float a[kPer], b[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) a[i] = A[(ty + 16 * i) * kStride + c];
#pragma unroll
    for (int j = 0; j < kPer; ++j) b[j] = B[c * kStride + tx + 16 * j];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[i][j] += a[i] * b[j];
  }
}

// acc[i][j] += sum_r A[r][ty+16i] * B[r][tx+16j]   (A^T B: P^T dO, dS^T Q)
__device__ __forceinline__ void accumulate_atb(Block4& acc, const float* A, const float* B,
                                               int ty, int tx) {
  for (int r = 0; r < kTile; ++r) {
    float a[kPer], b[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) a[i] = A[r * kStride + ty + 16 * i];
#pragma unroll
    for (int j = 0; j < kPer; ++j) b[j] = B[r * kStride + tx + 16 * j];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[i][j] += a[i] * b[j];
  }
}

// Max and sum over a row's 16 threads (one half-warp), in a fixed butterfly order.
__device__ __forceinline__ float row_max(float value) {
  for (int offset = 8; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}
__device__ __forceinline__ float row_sum(float value) {
  for (int offset = 8; offset > 0; offset /= 2)
    value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

__device__ __forceinline__ void store_block(float* tile, const Block4& values, int ty, int tx) {
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j) tile[(ty + 16 * i) * kStride + tx + 16 * j] = values[i][j];
}

// Rows of `values` (4 x 4 per thread: rows ty+16i, dims tx+16j) to global memory.
__device__ __forceinline__ void store_rows(float* base, size_t row_stride, const Block4& values,
                                           int row0, int T, int hs, int ty, int tx,
                                           const float (&row_factor)[kPer]) {
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int r = row0 + ty + 16 * i;
    if (r >= T) continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int d = tx + 16 * j;
      if (d < hs) base[static_cast<size_t>(r) * row_stride + d] = values[i][j] * row_factor[i];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    tiled_forward_kernel(float* out, float* logsumexp, const float* qkv, int T, int C, int NH) {
  extern __shared__ float shared[];
  float* Q = shared;
  float* K = Q + kTileFloats;
  float* V = K + kTileFloats;
  float* P = V + kTileFloats;
  const Head head = block_head(NH);
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  // Heaviest tiles (most keys below the diagonal) first: a shorter tail.
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int q0 = query_tile * kTile;
  const float* head_qkv = qkv + static_cast<size_t>(head.b) * T * 3 * C +
                          static_cast<size_t>(head.h) * hs;
  load_tile(Q, head_qkv, 3 * static_cast<size_t>(C), q0, T, hs);

  float m[kPer], l[kPer];
  Block4 o, s;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) o[i][j] = 0.0f;
  }
  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const int k0 = key_tile * kTile;
    __syncthreads();  // the previous tile's K, V and P are no longer read
    load_tile(K, head_qkv + C, 3 * static_cast<size_t>(C), k0, T, hs);
    load_tile(V, head_qkv + 2 * C, 3 * static_cast<size_t>(C), k0, T, hs);
    __syncthreads();
    product_abt(s, Q, K, ty, tx, hs);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int r = q0 + ty + 16 * i;
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int c = k0 + tx + 16 * j;
        // Rows past T get finite scores (never stored): no inf - inf anywhere.
        s[i][j] = r >= T ? 0.0f : (c <= r ? s[i][j] * scale : -INFINITY);
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      // Every valid row has a finite score in key tile 0 (column 0), so m is finite from
      // the first tile on and the corrections below are never exp(-inf - -inf).
      const float m_new = fmaxf(m[i], row_max(tile_max));
      const float correction = expf(m[i] - m_new);
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        s[i][j] = expf(s[i][j] - m_new);
        tile_sum += s[i][j];
        o[i][j] *= correction;
      }
      l[i] = l[i] * correction + row_sum(tile_sum);
      m[i] = m_new;
    }
    store_block(P, s, ty, tx);
    __syncthreads();
    accumulate_ab(o, P, V, ty, tx);
  }
  float inverse[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) inverse[i] = 1.0f / l[i];
  store_rows(out + static_cast<size_t>(head.b) * T * C + static_cast<size_t>(head.h) * hs, C, o,
             q0, T, hs, ty, tx, inverse);
  if (tx == 0) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int r = q0 + ty + 16 * i;
      if (r < T)
        logsumexp[(static_cast<size_t>(head.b) * NH + head.h) * T + r] = m[i] + logf(l[i]);
    }
  }
}

// Scores of a (query tile, key tile) pair turned into probabilities (0 above the diagonal
// and outside T), with dP beside them: p[i][j], dp[i][j] for rows ty+16i, keys tx+16j.
__device__ __forceinline__ void probabilities(Block4& p, Block4& dp, const float* Q,
                                              const float* K, const float* dO, const float* V,
                                              const float (&lse)[kPer], int q0, int k0, int T,
                                              int hs, float scale, int ty, int tx) {
  product_abt(p, Q, K, ty, tx, hs);
  product_abt(dp, dO, V, ty, tx, hs);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int r = q0 + ty + 16 * i;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int c = k0 + tx + 16 * j;
      p[i][j] = (r < T && c <= r) ? expf(p[i][j] * scale - lse[i]) : 0.0f;
    }
  }
}

// Per query tile: D_t (into dsum) and dq_t = sum_j dS_tj k_j (overwritten).
__global__ void __launch_bounds__(kThreads)
    tiled_backward_query_kernel(float* dqkv, float* dsum, const float* dout, const float* qkv,
                                const float* logsumexp, int T, int C, int NH) {
  extern __shared__ float shared[];
  float* Q = shared;
  float* dO = Q + kTileFloats;
  float* K = dO + kTileFloats;
  float* V = K + kTileFloats;
  float* dS = V + kTileFloats;
  const Head head = block_head(NH);
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int q0 = query_tile * kTile;
  const size_t qkv_stride = 3 * static_cast<size_t>(C);
  const float* head_qkv = qkv + static_cast<size_t>(head.b) * T * 3 * C +
                          static_cast<size_t>(head.h) * hs;
  const size_t head_rows = (static_cast<size_t>(head.b) * NH + head.h) * T;
  load_tile(Q, head_qkv, qkv_stride, q0, T, hs);
  load_tile(dO, dout + static_cast<size_t>(head.b) * T * C + static_cast<size_t>(head.h) * hs, C,
            q0, T, hs);
  float lse[kPer], D[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int r = q0 + ty + 16 * i;
    lse[i] = r < T ? logsumexp[head_rows + r] : 0.0f;
    D[i] = 0.0f;
  }
  Block4 p, dp;
  // Pass one: D_t = sum_j P_tj dP_tj, each thread's part over all key tiles, then the row.
  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const int k0 = key_tile * kTile;
    __syncthreads();
    load_tile(K, head_qkv + C, qkv_stride, k0, T, hs);
    load_tile(V, head_qkv + 2 * C, qkv_stride, k0, T, hs);
    __syncthreads();
    probabilities(p, dp, Q, K, dO, V, lse, q0, k0, T, hs, scale, ty, tx);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) D[i] += p[i][j] * dp[i][j];
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) D[i] = row_sum(D[i]);
  // Pass two: dq = sum over key tiles of dS K.
  Block4 dq;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j) dq[i][j] = 0.0f;
  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const int k0 = key_tile * kTile;
    __syncthreads();
    load_tile(K, head_qkv + C, qkv_stride, k0, T, hs);
    load_tile(V, head_qkv + 2 * C, qkv_stride, k0, T, hs);
    __syncthreads();
    probabilities(p, dp, Q, K, dO, V, lse, q0, k0, T, hs, scale, ty, tx);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) p[i][j] = p[i][j] * (dp[i][j] - D[i]) * scale;
    store_block(dS, p, ty, tx);
    __syncthreads();
    accumulate_ab(dq, dS, K, ty, tx);
  }
  const float one[kPer] = {1.0f, 1.0f, 1.0f, 1.0f};
  store_rows(dqkv + static_cast<size_t>(head.b) * T * 3 * C + static_cast<size_t>(head.h) * hs,
             qkv_stride, dq, q0, T, hs, ty, tx, one);
  if (tx == 0) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int r = q0 + ty + 16 * i;
      if (r < T) dsum[head_rows + r] = D[i];
    }
  }
}

// Per key tile: dk_j = sum_{t>=j} dS_tj q_t and dv_j = sum_{t>=j} P_tj dO_t (overwritten).
__global__ void __launch_bounds__(kThreads)
    tiled_backward_key_kernel(float* dqkv, const float* dsum, const float* dout, const float* qkv,
                              const float* logsumexp, int T, int C, int NH) {
  extern __shared__ float shared[];
  float* K = shared;
  float* V = K + kTileFloats;
  float* Q = V + kTileFloats;
  float* dO = Q + kTileFloats;
  float* P = dO + kTileFloats;
  float* dS = P + kTileFloats;
  const Head head = block_head(NH);
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int tiles = static_cast<int>(gridDim.x);
  // Key tile 0 has the most query tiles above it: first.
  const int key_tile = static_cast<int>(blockIdx.x);
  const int k0 = key_tile * kTile;
  const size_t qkv_stride = 3 * static_cast<size_t>(C);
  const float* head_qkv = qkv + static_cast<size_t>(head.b) * T * 3 * C +
                          static_cast<size_t>(head.h) * hs;
  const float* head_dout = dout + static_cast<size_t>(head.b) * T * C +
                           static_cast<size_t>(head.h) * hs;
  const size_t head_rows = (static_cast<size_t>(head.b) * NH + head.h) * T;
  load_tile(K, head_qkv + C, qkv_stride, k0, T, hs);
  load_tile(V, head_qkv + 2 * C, qkv_stride, k0, T, hs);
  Block4 dk, dv, p, dp;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j) dk[i][j] = dv[i][j] = 0.0f;
  for (int query_tile = key_tile; query_tile < tiles; ++query_tile) {
    const int q0 = query_tile * kTile;
    __syncthreads();  // the previous tile's Q, dO, P and dS are no longer read
    load_tile(Q, head_qkv, qkv_stride, q0, T, hs);
    load_tile(dO, head_dout, C, q0, T, hs);
    float lse[kPer], D[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int r = q0 + ty + 16 * i;
      lse[i] = r < T ? logsumexp[head_rows + r] : 0.0f;
      D[i] = r < T ? dsum[head_rows + r] : 0.0f;
    }
    __syncthreads();
    probabilities(p, dp, Q, K, dO, V, lse, q0, k0, T, hs, scale, ty, tx);
    store_block(P, p, ty, tx);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) dp[i][j] = p[i][j] * (dp[i][j] - D[i]) * scale;
    store_block(dS, dp, ty, tx);
    __syncthreads();
    accumulate_atb(dv, P, dO, ty, tx);
    accumulate_atb(dk, dS, Q, ty, tx);
  }
  const float one[kPer] = {1.0f, 1.0f, 1.0f, 1.0f};
  float* head_dqkv =
      dqkv + static_cast<size_t>(head.b) * T * 3 * C + static_cast<size_t>(head.h) * hs;
  store_rows(head_dqkv + C, qkv_stride, dk, k0, T, hs, ty, tx, one);
  store_rows(head_dqkv + 2 * C, qkv_stride, dv, k0, T, hs, ty, tx, one);
}

constexpr size_t shared_bytes(int tiles) { return sizeof(float) * kTileFloats * tiles; }

// Over 48 KiB of dynamic shared memory needs the kernel's opt-in, once per process and
// device (set each call: cheap, and right on whichever device is current).
template <class Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  DSEEK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
}

dim3 tile_grid(int B, int T, int NH) {
  return dim3(static_cast<unsigned>((T + kTile - 1) / kTile), static_cast<unsigned>(B * NH));
}

}  // namespace

bool tiled_attention_handles(int B, int T, int C, int NH) {
  return NH > 0 && C % NH == 0 && C / NH <= kTile && static_cast<long long>(B) * NH <= 65535 &&
         T > 0;
}

void tiled_attention_forward(cudaStream_t stream, float* out, float* logsumexp, const float* qkv,
                             int B, int T, int C, int NH) {
  allow_shared(tiled_forward_kernel, shared_bytes(4));
  tiled_forward_kernel<<<tile_grid(B, T, NH), kThreads, shared_bytes(4), stream>>>(
      out, logsumexp, qkv, T, C, NH);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "tiled_forward_kernel");
}

void tiled_attention_backward(cudaStream_t stream, float* dsum, float* dqkv, const float* dout,
                              const float* qkv, const float* logsumexp, int B, int T, int C,
                              int NH) {
  allow_shared(tiled_backward_query_kernel, shared_bytes(5));
  allow_shared(tiled_backward_key_kernel, shared_bytes(6));
  tiled_backward_query_kernel<<<tile_grid(B, T, NH), kThreads, shared_bytes(5), stream>>>(
      dqkv, dsum, dout, qkv, logsumexp, T, C, NH);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "tiled_backward_query_kernel");
  tiled_backward_key_kernel<<<tile_grid(B, T, NH), kThreads, shared_bytes(6), stream>>>(
      dqkv, dsum, dout, qkv, logsumexp, T, C, NH);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "tiled_backward_key_kernel");
}

}  // namespace dseek::gpu::kernels
