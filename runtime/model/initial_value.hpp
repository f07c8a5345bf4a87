// The initial value of one parameter of the whole GPT model, as a pure function of
// (seed, its index in the whole model's flat buffer): GPT-2's N(0, std) for matrices and
// embeddings, std / sqrt(2 L) for the residual output projections, zero biases, unit
// LayerNorm gains. The whole model and a tensor rank's part of it (GptModel over a
// group) both initialise from it, so they start from the same weights.
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/model/init_rng.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::model {

inline float initial_value(const ParamTensor& tensor, size_t whole_index, uint64_t seed,
                           double std, int64_t layers) {
  const bool is_gain = tensor.name.ends_with("ln1.weight") ||
                       tensor.name.ends_with("ln2.weight") || tensor.name == "lnf.weight";
  if (is_gain) return 1.0f;
  if (tensor.shape.size() != 2) return 0.0f;
  const double scale =
      tensor.residual_projection ? std / std::sqrt(2.0 * static_cast<double>(layers)) : std;
  return static_cast<float>(normal_at(seed, whole_index) * scale);
}

}  // namespace dseek::model
