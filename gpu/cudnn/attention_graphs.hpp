// The two operation graphs of cuDNN's fused causal attention on dseek's (B, T, 3C) qkv
// layout (attention_graphs.cpp says which operations): their tensors and operations
// only, without a handle, so a test can check on any machine that every descriptor
// finalizes; CudnnAttention builds plans from them.
#pragma once

#include <memory>

#include "gpu/cudnn/cudnn_graph.hpp"

namespace dseek::gpu::cudnn {

// The uids of the tensors bound at execution (both graphs).
enum AttentionUid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSoftmaxSum, kDQAccum
};
// cuDNN's fused attention takes head sizes that are multiples of 8, up to this.
constexpr int kMaxFusedHeadSize = 128;

std::shared_ptr<Graph> attention_forward_graph(const Library& lib, int B, int T, int C, int NH,
                                               float negative_infinity);
// deterministic: dQ written by its product; else accumulated in an fp32 buffer (kDQAccum).
std::shared_ptr<Graph> attention_backward_graph(const Library& lib, int B, int T, int C, int NH,
                                                float negative_infinity, bool deterministic);

}  // namespace dseek::gpu::cudnn
