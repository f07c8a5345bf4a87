// Softmax and cross-entropy fused on the CPU, in place on the logits buffer: forward
// turns logits into probabilities (and per-token losses), backward turns probabilities
// into logit gradients. One (N, V) buffer serves all three, which matters for a 50k
// vocabulary. Also the vocabulary-parallel cross-entropy's pieces (backend.hpp), on a
// tensor-parallel rank's (N, V / T) slice of the logits.
#include <algorithm>
#include <cmath>
#include <limits>

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
  vocab_parallel_cross_entropy_backward(probs_to_dlogits, targets, VocabSlice::whole(V), N, dloss);
}

// The vocabulary-parallel pieces (backend.hpp) are the loops above cut where the group's
// all-reduces go, with the same arithmetic: at T = 1 they compute the fused op's values.
// Padded rows (slice.padded, at the slice's end) are left out of the maximum and the sum
// and become probability 0, so their logit gradient in backward is 0: at padded = 0 the
// loops are those of the fused op.
void CpuBackend::vocab_parallel_logit_max(float* max_slots, const float* logits,
                                          VocabSlice slice, int N, int rank, int ranks) {
  const int V_local = slice.rows;
  const int real = slice.real_rows();
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      const float* row = logits + r * V_local;
      float max_value = real > 0 ? row[0] : std::numeric_limits<float>::lowest();
#pragma omp simd reduction(max : max_value)
      for (int j = 0; j < real; ++j) max_value = std::max(max_value, row[j]);
      float* slots = max_slots + r * ranks;
      std::fill_n(slots, ranks, 0.0f);
      slots[rank] = max_value;
    }
  }, 8);
}

void CpuBackend::vocab_parallel_exp_sums(float* logits_to_exps, float* sums_and_targets,
                                         const float* max_slots, const int32_t* targets,
                                         VocabSlice slice, int N, int ranks) {
  const int V = slice.rows;
  const int real = slice.real_rows();
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      const float* slots = max_slots + r * ranks;
      const float max_value = *std::max_element(slots, slots + ranks);
      float* row = logits_to_exps + r * V;
      sums_and_targets[N + r] =
          slice.holds(targets[r]) ? row[targets[r] - slice.begin] - max_value : 0.0f;
      float total = 0.0f;
#pragma omp simd reduction(+ : total)
      for (int j = 0; j < real; ++j) {
        const float e = util::exp_approx(row[j] - max_value);
        row[j] = e;
        total += e;
      }
      std::fill(row + real, row + V, 0.0f);
      sums_and_targets[r] = total;
    }
  }, 8);
}

void CpuBackend::vocab_parallel_softmax_loss(float* exps_to_probs, float* losses,
                                             const float* sums_and_targets, int N,
                                             int V_local) {
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      const float total = sums_and_targets[r];
      float* row = exps_to_probs + r * V_local;
      const float inverse = 1.0f / total;
#pragma omp simd
      for (int j = 0; j < V_local; ++j) row[j] *= inverse;
      losses[r] = std::log(total) - sums_and_targets[N + r];
    }
  }, 8);
}

void CpuBackend::vocab_parallel_cross_entropy_backward(float* probs_to_dlogits,
                                                       const int32_t* targets, VocabSlice slice,
                                                       int N, float dloss) {
  const int V = slice.rows;
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      float* row = probs_to_dlogits + r * V;
#pragma omp simd
      for (int j = 0; j < V; ++j) row[j] *= dloss;
      if (slice.holds(targets[r])) row[targets[r] - slice.begin] -= dloss;
    }
  }, 8);
}

}  // namespace dseek::backend
