// Softmax and cross-entropy fused on the CPU, in place on the logits buffer: forward
// turns logits into probabilities (and per-token losses), backward turns probabilities
// into logit gradients. One (N, V) buffer serves all three, which matters for a 50k
// vocabulary.
#include <algorithm>
#include <cmath>

#include "runtime/backend/cpu_backend.hpp"
#include "runtime/util/fast_math.hpp"

namespace dseek::backend {

void CpuBackend::softmax_cross_entropy_forward(float* logits_to_probs, float* losses,
                                               const int32_t* targets, int N, int V) {
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      float* row = logits_to_probs + r * V;
      float max_value = row[0];
#pragma omp simd reduction(max : max_value)
      for (int j = 0; j < V; ++j) max_value = std::max(max_value, row[j]);
      const float target_logit = row[targets[r]];
      float total = 0.0f;
#pragma omp simd reduction(+ : total)
      for (int j = 0; j < V; ++j) {
        const float e = util::exp_approx(row[j] - max_value);
        row[j] = e;
        total += e;
      }
      const float inverse = 1.0f / total;
#pragma omp simd
      for (int j = 0; j < V; ++j) row[j] *= inverse;
      // -log softmax computed from the logits, not from the rounded probability.
      losses[r] = std::log(total) - (target_logit - max_value);
    }
  }, 8);
}

void CpuBackend::softmax_cross_entropy_backward(float* probs_to_dlogits, const int32_t* targets,
                                                int N, int V, float dloss) {
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      float* row = probs_to_dlogits + r * V;
#pragma omp simd
      for (int j = 0; j < V; ++j) row[j] *= dloss;
      row[targets[r]] -= dloss;
    }
  }, 8);
}

}  // namespace dseek::backend
