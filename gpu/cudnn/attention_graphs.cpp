// The two operation graphs of cuDNN's fused causal attention on dseek's (B, T, 3C) qkv
// layout, as cuDNN fuses them into one kernel each (the same operations, in the same
// order, that cudnn-frontend's sdpa and sdpa_backward nodes lower to):
//   forward:  S = Q K^T * scale, causal mask (row index >= column index, else -inf),
//             stats = max + log(sum exp(S - max)), O = (exp(S - max) / sum) V
//   backward: sum_d = rowsum(dO * O), P = exp(Q K^T * scale - stats) (masked),
//             dV = P^T dO, dS = P * (dO V^T - sum_d) * scale, dK = dS^T Q, dQ = dS K
// Q, K and V are strided views into the (B, T, 3C) bf16 copy of qkv; K^T and V^T are the
// same memory with the last two strides swapped. Only tensors and operations: no handle,
// so a test can check on any machine that every descriptor finalizes.
#include "gpu/cudnn/attention_graphs.hpp"

#include <cmath>

namespace dseek::gpu::cudnn {

namespace {

struct Layout {  // one shape's tensor geometry, [batch, head, row, column]
  int64_t B, T, C, NH, hs;
  Shape qkv_dims() const { return {B, NH, T, hs}; }
  Shape qkv_strides() const { return {T * 3 * C, hs, 3 * C, 1}; }
  Shape transposed_dims() const { return {B, NH, hs, T}; }
  Shape transposed_strides() const { return {T * 3 * C, hs, 1, 3 * C}; }
  Shape out_strides() const { return {T * C, hs, C, 1}; }
  Shape stats_dims() const { return {B, NH, T, 1}; }
  Shape score_dims() const { return {B, NH, T, T}; }
  Shape score_transposed_strides() const { return {NH * T * T, T * T, 1, T}; }
};

// S (scores) masked causally: keys after the query row get `negative_infinity`.
int64_t causal_mask(Graph& g, int64_t scores, float negative_infinity) {
  const int64_t row = g.index(scores, 2);
  const int64_t column = g.index(scores, 3);
  const int64_t keep = g.pointwise(CUDNN_POINTWISE_CMP_GE, row, column, -1, CUDNN_DATA_BOOLEAN,
                                   CUDNN_DATA_BOOLEAN);
  return g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, g.scalar(negative_infinity), keep);
}

float attention_scale(int C, int NH) { return 1.0f / std::sqrt(static_cast<float>(C / NH)); }

std::shared_ptr<Graph> forward_graph(const Library& lib, const Layout& l, float scale,
                                     float negative_infinity) {
  auto graph = std::make_shared<Graph>(lib);
  Graph& g = *graph;
  const int64_t q = g.tensor(kQ, l.qkv_dims(), l.qkv_strides(), CUDNN_DATA_BFLOAT16);
  const int64_t kt = g.tensor(kK, l.transposed_dims(), l.transposed_strides(), CUDNN_DATA_BFLOAT16);
  const int64_t v = g.tensor(kV, l.qkv_dims(), l.qkv_strides(), CUDNN_DATA_BFLOAT16);
  const int64_t o = g.tensor(kO, l.qkv_dims(), l.out_strides(), CUDNN_DATA_BFLOAT16);
  const int64_t stats =
      g.tensor(kStats, l.stats_dims(), cudnn::packed_strides(l.stats_dims()), CUDNN_DATA_FLOAT);

  const int64_t s = g.virtual_tensor(l.score_dims(), cudnn::packed_strides(l.score_dims()));
  g.matmul_into(s, q, kt);
  const int64_t scaled = g.pointwise(CUDNN_POINTWISE_MUL, s, g.scalar(scale));
  const int64_t masked = causal_mask(g, scaled, negative_infinity);
  // softmax, with its logsumexp as the state for the backward
  const int64_t max = g.virtual_tensor(l.stats_dims(), cudnn::packed_strides(l.stats_dims()));
  g.reduction_into(max, CUDNN_REDUCE_TENSOR_MAX, masked);
  const int64_t shifted = g.pointwise(CUDNN_POINTWISE_SUB, masked, max);
  const int64_t exps = g.pointwise(CUDNN_POINTWISE_EXP, shifted);
  const int64_t sum = g.virtual_tensor(l.stats_dims(), cudnn::packed_strides(l.stats_dims()));
  g.reduction_into(sum, CUDNN_REDUCE_TENSOR_ADD, exps);
  const int64_t log_sum = g.pointwise(CUDNN_POINTWISE_LOG, sum);
  g.pointwise_into(stats, CUDNN_POINTWISE_ADD, max, log_sum);
  // P in bf16: the second product's operand
  const int64_t p = g.pointwise(CUDNN_POINTWISE_DIV, exps, sum, -1, CUDNN_DATA_BFLOAT16);
  g.matmul_into(o, p, v);
  return graph;
}

std::shared_ptr<Graph> backward_graph(const Library& lib, const Layout& l, float scale,
                                      float negative_infinity, bool deterministic) {
  auto graph = std::make_shared<Graph>(lib);
  Graph& g = *graph;
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16;
  const int64_t q = g.tensor(kQ, l.qkv_dims(), l.qkv_strides(), bf16);
  const int64_t kt = g.tensor(kK, l.transposed_dims(), l.transposed_strides(), bf16);
  const int64_t vt = g.tensor(kV, l.transposed_dims(), l.transposed_strides(), bf16);
  const int64_t o = g.tensor(kO, l.qkv_dims(), l.out_strides(), bf16);
  const int64_t d_o = g.tensor(kDO, l.qkv_dims(), l.out_strides(), bf16);
  const Shape stats_strides = cudnn::packed_strides(l.stats_dims());
  const int64_t stats = g.tensor(kStats, l.stats_dims(), stats_strides, CUDNN_DATA_FLOAT);
  const int64_t softmax_sum = g.tensor(kSoftmaxSum, l.stats_dims(), stats_strides, CUDNN_DATA_FLOAT);
  const int64_t dq = g.tensor(kDQ, l.qkv_dims(), l.qkv_strides(), bf16);
  const int64_t dk = g.tensor(kDK, l.qkv_dims(), l.qkv_strides(), bf16);
  const int64_t dv = g.tensor(kDV, l.qkv_dims(), l.qkv_strides(), bf16);
  const Shape score_strides = cudnn::packed_strides(l.score_dims());

  // sum_d = rowsum(dO * O): the softmax backward's per-row term
  const int64_t d_o_o = g.pointwise(CUDNN_POINTWISE_MUL, d_o, o);
  const int64_t row_sum = g.virtual_tensor(l.stats_dims(), stats_strides);
  g.reduction_into(row_sum, CUDNN_REDUCE_TENSOR_ADD, d_o_o);
  g.pointwise_into(softmax_sum, CUDNN_POINTWISE_MUL, row_sum, g.scalar(1.0f));

  // P again from the saved logsumexp
  const int64_t s = g.virtual_tensor(l.score_dims(), score_strides);
  g.matmul_into(s, q, kt);
  const int64_t scaled = g.pointwise(CUDNN_POINTWISE_MUL, s, g.scalar(scale));
  const int64_t shifted = g.pointwise(CUDNN_POINTWISE_SUB, scaled, stats);
  const int64_t masked = causal_mask(g, shifted, negative_infinity);
  const int64_t p = g.pointwise(CUDNN_POINTWISE_EXP, masked);

  // dV = P^T dO
  const int64_t pt = g.virtual_tensor(l.score_dims(), l.score_transposed_strides(), bf16);
  g.reshape_into(pt, p);
  g.matmul_into(dv, pt, d_o);

  // dS = P * (dO V^T - sum_d) * scale
  const int64_t dp = g.virtual_tensor(l.score_dims(), score_strides);
  g.matmul_into(dp, d_o, vt);
  const int64_t centred = g.pointwise(CUDNN_POINTWISE_SUB, dp, softmax_sum);
  const int64_t weighted = g.pointwise(CUDNN_POINTWISE_MUL, centred, p);
  const int64_t ds = g.pointwise(CUDNN_POINTWISE_MUL, weighted, g.scalar(scale));

  // dK = dS^T Q
  const int64_t dst = g.virtual_tensor(l.score_dims(), l.score_transposed_strides(), bf16);
  g.reshape_into(dst, ds);
  g.matmul_into(dk, dst, q);

  // dQ = dS K (K: K^T's memory seen untransposed)
  const int64_t k = g.virtual_tensor(l.qkv_dims(), l.qkv_strides(), bf16);
  g.reshape_into(k, kt);
  if (deterministic) {
    g.matmul_into(dq, ds, k);
  } else {  // fp32 accumulation buffer (cuDNN adds into it with atomics), then dQ
    const Shape accum_dims = l.qkv_dims();
    const int64_t accum =
        g.tensor(kDQAccum, accum_dims, cudnn::packed_strides(accum_dims), CUDNN_DATA_FLOAT);
    g.matmul_into(accum, ds, k);
    g.pointwise_into(dq, CUDNN_POINTWISE_IDENTITY, accum);
  }
  return graph;
}

}  // namespace

std::shared_ptr<Graph> attention_forward_graph(const Library& lib, int B, int T, int C, int NH,
                                               float negative_infinity) {
  return forward_graph(lib, Layout{B, T, C, NH, C / NH}, attention_scale(C, NH),
                       negative_infinity);
}

std::shared_ptr<Graph> attention_backward_graph(const Library& lib, int B, int T, int C, int NH,
                                                float negative_infinity, bool deterministic) {
  return backward_graph(lib, Layout{B, T, C, NH, C / NH}, attention_scale(C, NH),
                        negative_infinity, deterministic);
}

}  // namespace dseek::gpu::cudnn
