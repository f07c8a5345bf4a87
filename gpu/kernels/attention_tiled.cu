// Causal attention in 64 x 64 tiles through shared memory, for head sizes up to 64 (GPT-2's
// is 64): the fast path of attention.cu, which keeps its warp-per-row kernels for larger
// heads. Same numerics contract: fp32 arithmetic (under bf16 the products' operands are
// rounded to bf16 as they enter shared memory), the probabilities never stored, per row
// the logsumexp saved; every sum in a fixed order (no atomics), so results are
// deterministic, and they agree with the CPU backend to the rounding of their format.
//
// Why tiles: the warp-per-row kernels read every key and value once per query row from
// global memory and reduce each score across a warp; on an H200 they took 87% of a GPT-2
// 124M training step (ncu, 2026-11-30). Here a block of 256 threads loads a tile of 64
// queries and, in turn, tiles of 64 keys and values into shared memory, and each thread
// computes a 4 x 4 block of every 64 x 64 product from there.
//
// Thread layout: thread (ty, tx) = (tid / 16, tid % 16) owns rows ty + 16 i and columns
// tx + 16 j (i, j < 4) of a score tile; a row's 16 threads are one half-warp, so a row
// max or sum is a 4-step butterfly. Products read their operands from shared memory four
// floats at a time (float4 along the summed index, or along the output columns): tiles
// are stored with a row stride of 68 floats, a multiple of 4 that puts the rows 8 threads
// read at once in different banks. Per 4 steps of a sum a warp then reads 12 wavefronts
// of shared memory for 64 FMAs, which keeps the FMA pipes, not shared memory, the limit.
//
// Backward (P the probabilities, dP = dO V^T, D_t = sum_j P_tj dP_tj,
// dS = P (dP - D) * scale): D_t = dO_t . O_t from the forward's output (the caller's, as
// FlashAttention-2 takes it); then one kernel per query tile computes
// dQ = dS K, and one kernel per key tile walks the query tiles below the diagonal for
// dK = dS^T Q and dV = P^T dO.
#include <cmath>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/attention_tiled.hpp"
#include "gpu/kernels/device_helpers.cuh"

namespace dseek::gpu::kernels {

namespace {

constexpr int kTile = 64;           // rows of a query or key tile
constexpr int kStride = kTile + 4;  // floats per stored tile row (see the top)
constexpr int kTileFloats = kTile * kStride;
constexpr int kThreads = 256;       // 16 x 16 threads, each 4 x 4 of a tile
constexpr int kPer = 4;             // rows (and columns) per thread

using Block4 = float[kPer][kPer];

// Which rows (or columns) of a tile a thread's 4 x 4 block covers: index * spread + k * step
// for k < 4, with index ty (rows) or tx (columns). Interleaved {1, 16} keeps a row's 16
// threads in one half-warp (the softmax's row max and sum); contiguous {4, 1} lets a
// thread read its 4 values of a tile row as one float4.
struct Spread {
  int spread, step;
};
constexpr Spread kInterleaved{1, 16};
constexpr Spread kContiguous{4, 1};

__device__ __forceinline__ float4 load4(const float* tile, int offset) {
  return *reinterpret_cast<const float4*>(tile + offset);
}
__device__ __forceinline__ float element(const float4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

struct Head {
  int b, h;
};

__device__ __forceinline__ Head block_head(int NH) {
  return {static_cast<int>(blockIdx.y) / NH, static_cast<int>(blockIdx.y) % NH};
}

// Rows row0 .. row0+63 of one head's vectors into `tile`; `base` points at row 0, dimension
// 0 of that head, rows `row_stride` floats apart. Rows past T and dimensions past hs are 0.
// bf16: stored rounded, as products' operands.
__device__ void load_tile(float* tile, const float* base, size_t row_stride, int row0, int T,
                          int hs, bool bf16) {
  for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
    const int r = i / kTile, d = i % kTile;
    tile[r * kStride + d] =
        (row0 + r < T && d < hs)
            ? product_operand(base[static_cast<size_t>(row0 + r) * row_stride + d], bf16)
            : 0.0f;
  }
}

// acc[i][j] = sum_d A[ty+16i][d] * B[tx+16j][d]   (A B^T: scores, dP), d < depth rounded
// up to 4 (the tiles are zero past the head size).
__device__ __forceinline__ void product_abt(Block4& acc, const float* A, const float* B, int ty,
                                            int tx, int depth) {
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[i][j] = 0.0f;
  for (int d = 0; d < depth; d += 4) {
    float4 a[kPer], b[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) a[i] = load4(A, (ty + 16 * i) * kStride + d);
#pragma unroll
    for (int j = 0; j < kPer; ++j) b[j] = load4(B, (tx + 16 * j) * kStride + d);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        acc[i][j] += a[i].x * b[j].x;
        acc[i][j] += a[i].y * b[j].y;
        acc[i][j] += a[i].z * b[j].z;
        acc[i][j] += a[i].w * b[j].w;
      }
  }
}

// acc[i][j] += sum_c A[ty+16i][c] * B[c][4tx+j]   (A B: P V, dS K)
__device__ __forceinline__ void accumulate_ab(Block4& acc, const float* A, const float* B, int ty,
                                              int tx) {
  for (int c = 0; c < kTile; c += 4) {
    float4 a[kPer], b[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) a[i] = load4(A, (ty + 16 * i) * kStride + c);
#pragma unroll
    for (int k = 0; k < kPer; ++k) b[k] = load4(B, (c + k) * kStride + 4 * tx);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const float a_k = element(a[i], k);
        acc[i][0] += a_k * b[k].x;
        acc[i][1] += a_k * b[k].y;
        acc[i][2] += a_k * b[k].z;
        acc[i][3] += a_k * b[k].w;
      }
  }
}

// acc[i][j] += sum_r A[r][4ty+i] * B[r][4tx+j]   (A^T B: P^T dO, dS^T Q)
__device__ __forceinline__ void accumulate_atb(Block4& acc, const float* A, const float* B,
                                               int ty, int tx) {
  for (int r = 0; r < kTile; ++r) {
    const float4 a = load4(A, r * kStride + 4 * ty);
    const float4 b = load4(B, r * kStride + 4 * tx);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const float a_i = element(a, i);
      acc[i][0] += a_i * b.x;
      acc[i][1] += a_i * b.y;
      acc[i][2] += a_i * b.z;
      acc[i][3] += a_i * b.w;
    }
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

__device__ __forceinline__ void store_block(float* tile, const Block4& values, int ty, int tx,
                                            bool bf16) {
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      tile[(ty + 16 * i) * kStride + tx + 16 * j] = product_operand(values[i][j], bf16);
}

// A thread's 4 x 4 block of a tile (rows `rows`, head dimensions `dims` of the thread's
// ty and tx), each row times row_factor[i], to global memory; rows past T and dimensions
// past hs are not written.
__device__ __forceinline__ void store_rows(float* base, size_t row_stride, const Block4& values,
                                           int row0, int T, int hs, int ty, int tx, Spread rows,
                                           Spread dims, const float (&row_factor)[kPer]) {
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int r = row0 + ty * rows.spread + i * rows.step;
    if (r >= T) continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int d = tx * dims.spread + j * dims.step;
      if (d < hs) base[static_cast<size_t>(r) * row_stride + d] = values[i][j] * row_factor[i];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    tiled_forward_kernel(float* out, float* logsumexp, const float* qkv, int T, int C, int NH,
                         bool bf16) {
  extern __shared__ float4 shared_memory[];  // float4: 16-byte aligned
  float* shared = reinterpret_cast<float*>(shared_memory);
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
  const int depth = (hs + 3) / 4 * 4;  // the tiles are zero from hs to 64
  const float* head_qkv = qkv + static_cast<size_t>(head.b) * T * 3 * C +
                          static_cast<size_t>(head.h) * hs;
  load_tile(Q, head_qkv, 3 * static_cast<size_t>(C), q0, T, hs, bf16);

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
    load_tile(K, head_qkv + C, 3 * static_cast<size_t>(C), k0, T, hs, bf16);
    load_tile(V, head_qkv + 2 * C, 3 * static_cast<size_t>(C), k0, T, hs, bf16);
    __syncthreads();
    product_abt(s, Q, K, ty, tx, depth);
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
    store_block(P, s, ty, tx, bf16);
    __syncthreads();
    accumulate_ab(o, P, V, ty, tx);
  }
  float inverse[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) inverse[i] = 1.0f / l[i];
  const size_t head_out = static_cast<size_t>(head.b) * T * C + static_cast<size_t>(head.h) * hs;
  store_rows(out + head_out, C, o, q0, T, hs, ty, tx, kInterleaved, kContiguous, inverse);
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
  const int depth = (hs + 3) / 4 * 4;
  product_abt(p, Q, K, ty, tx, depth);
  product_abt(dp, dO, V, ty, tx, depth);
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

// D_t = dO_t . O_t for every (b, h, t) row (= sum_j P_tj dP_tj, as FlashAttention-2 gets
// it): one warp per row, lanes over the head's dimensions, a fixed butterfly.
__global__ void row_dot_kernel(float* dsum, const float* dout, const float* out, int B, int T,
                               int C, int NH) {
  const long long row = static_cast<long long>(blockIdx.x) * (kThreads / kWarpSize) +
                        threadIdx.x / kWarpSize;
  if (row >= static_cast<long long>(B) * NH * T) return;  // the whole warp leaves together
  const int lane = threadIdx.x % kWarpSize;
  const int t = static_cast<int>(row % T);
  const long long bh = row / T;
  const int h = static_cast<int>(bh % NH), b = static_cast<int>(bh / NH);
  const int hs = C / NH;
  const size_t offset = (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * hs;
  float partial = 0.0f;
  for (int d = lane; d < hs; d += kWarpSize) partial += dout[offset + d] * out[offset + d];
  const float total = warp_sum(partial);
  if (lane == 0) dsum[row] = total;
}

// Per query tile: dq_t = sum_j dS_tj k_j (overwritten), with D_t from dsum (row_dot_kernel).
__global__ void __launch_bounds__(kThreads)
    tiled_backward_query_kernel(float* dqkv, const float* dsum, const float* dout, const float* qkv,
                                const float* logsumexp, int T, int C, int NH, bool bf16) {
  extern __shared__ float4 shared_memory[];  // float4: 16-byte aligned
  float* shared = reinterpret_cast<float*>(shared_memory);
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
  load_tile(Q, head_qkv, qkv_stride, q0, T, hs, bf16);
  load_tile(dO, dout + static_cast<size_t>(head.b) * T * C + static_cast<size_t>(head.h) * hs, C,
            q0, T, hs, bf16);
  float lse[kPer], D[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int r = q0 + ty + 16 * i;
    lse[i] = r < T ? logsumexp[head_rows + r] : 0.0f;
    D[i] = r < T ? dsum[head_rows + r] : 0.0f;
  }
  Block4 p, dp;
  // dq = sum over key tiles of dS K.
  Block4 dq;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j) dq[i][j] = 0.0f;
  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const int k0 = key_tile * kTile;
    __syncthreads();
    load_tile(K, head_qkv + C, qkv_stride, k0, T, hs, bf16);
    load_tile(V, head_qkv + 2 * C, qkv_stride, k0, T, hs, bf16);
    __syncthreads();
    probabilities(p, dp, Q, K, dO, V, lse, q0, k0, T, hs, scale, ty, tx);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) p[i][j] = p[i][j] * (dp[i][j] - D[i]) * scale;
    store_block(dS, p, ty, tx, bf16);
    __syncthreads();
    accumulate_ab(dq, dS, K, ty, tx);
  }
  const float one[kPer] = {1.0f, 1.0f, 1.0f, 1.0f};
  store_rows(dqkv + static_cast<size_t>(head.b) * T * 3 * C + static_cast<size_t>(head.h) * hs,
             qkv_stride, dq, q0, T, hs, ty, tx, kInterleaved, kContiguous, one);
}

// Per key tile: dk_j = sum_{t>=j} dS_tj q_t and dv_j = sum_{t>=j} P_tj dO_t (overwritten).
__global__ void __launch_bounds__(kThreads)
    tiled_backward_key_kernel(float* dqkv, const float* dsum, const float* dout, const float* qkv,
                              const float* logsumexp, int T, int C, int NH, bool bf16) {
  extern __shared__ float4 shared_memory[];  // float4: 16-byte aligned
  float* shared = reinterpret_cast<float*>(shared_memory);
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
  load_tile(K, head_qkv + C, qkv_stride, k0, T, hs, bf16);
  load_tile(V, head_qkv + 2 * C, qkv_stride, k0, T, hs, bf16);
  Block4 dk, dv, p, dp;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j) dk[i][j] = dv[i][j] = 0.0f;
  for (int query_tile = key_tile; query_tile < tiles; ++query_tile) {
    const int q0 = query_tile * kTile;
    __syncthreads();  // the previous tile's Q, dO, P and dS are no longer read
    load_tile(Q, head_qkv, qkv_stride, q0, T, hs, bf16);
    load_tile(dO, head_dout, C, q0, T, hs, bf16);
    float lse[kPer], D[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int r = q0 + ty + 16 * i;
      lse[i] = r < T ? logsumexp[head_rows + r] : 0.0f;
      D[i] = r < T ? dsum[head_rows + r] : 0.0f;
    }
    __syncthreads();
    probabilities(p, dp, Q, K, dO, V, lse, q0, k0, T, hs, scale, ty, tx);
    store_block(P, p, ty, tx, bf16);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) dp[i][j] = p[i][j] * (dp[i][j] - D[i]) * scale;
    store_block(dS, dp, ty, tx, bf16);
    __syncthreads();
    accumulate_atb(dv, P, dO, ty, tx);
    accumulate_atb(dk, dS, Q, ty, tx);
  }
  const float one[kPer] = {1.0f, 1.0f, 1.0f, 1.0f};
  float* head_dqkv =
      dqkv + static_cast<size_t>(head.b) * T * 3 * C + static_cast<size_t>(head.h) * hs;
  store_rows(head_dqkv + C, qkv_stride, dk, k0, T, hs, ty, tx, kContiguous, kContiguous, one);
  store_rows(head_dqkv + 2 * C, qkv_stride, dv, k0, T, hs, ty, tx, kContiguous, kContiguous, one);
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
                             int B, int T, int C, int NH, bool bf16) {
  allow_shared(tiled_forward_kernel, shared_bytes(4));
  tiled_forward_kernel<<<tile_grid(B, T, NH), kThreads, shared_bytes(4), stream>>>(
      out, logsumexp, qkv, T, C, NH, bf16);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "tiled_forward_kernel");
}

void tiled_attention_backward(cudaStream_t stream, float* dsum, float* dqkv, const float* dout,
                              const float* qkv, const float* out, const float* logsumexp, int B,
                              int T, int C, int NH, bool bf16) {
  const long long rows = static_cast<long long>(B) * NH * T;
  const int warps_per_block = kThreads / kWarpSize;
  row_dot_kernel<<<static_cast<unsigned>((rows + warps_per_block - 1) / warps_per_block), kThreads,
                   0, stream>>>(dsum, dout, out, B, T, C, NH);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "row_dot_kernel");
  allow_shared(tiled_backward_query_kernel, shared_bytes(5));
  allow_shared(tiled_backward_key_kernel, shared_bytes(6));
  tiled_backward_query_kernel<<<tile_grid(B, T, NH), kThreads, shared_bytes(5), stream>>>(
      dqkv, dsum, dout, qkv, logsumexp, T, C, NH, bf16);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "tiled_backward_query_kernel");
  tiled_backward_key_kernel<<<tile_grid(B, T, NH), kThreads, shared_bytes(6), stream>>>(
      dqkv, dsum, dout, qkv, logsumexp, T, C, NH, bf16);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "tiled_backward_key_kernel");
}

}  // namespace dseek::gpu::kernels
