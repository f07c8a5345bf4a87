// A small GPT on the CPU backend for numerical tests: shape, weights with every kind of
// parameter non-trivial (biases and LayerNorm gains perturbed away from 0 and 1), and
// a reproducible random batch.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/model/gpt_model.hpp"

namespace dseek::testing {

struct SmallBatch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> tokens, targets;
};

inline SmallBatch random_batch(int64_t B, int64_t T, int64_t vocab, uint32_t seed) {
  SmallBatch batch{B, T, {}, {}};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  for (int64_t i = 0; i < B * T; ++i) {
    batch.tokens.push_back(id(rng));
    batch.targets.push_back(id(rng));
  }
  return batch;
}

// GPT-2 init with `std`, then every 1-D tensor (biases, gains) moved by N(0, 0.1) so
// that no gradient path is hidden behind a zero bias or a unit gain.
// The whole model only: layout() is the buffer's layout at tensor size 1.
inline void init_nontrivial(model::GptModel& model, uint64_t seed, double std) {
  if (model.tensor_ranks() != 1)
    throw std::invalid_argument("init_nontrivial: a tensor rank's buffer is not the whole layout");
  model.init_weights(seed, std);
  std::mt19937 rng(static_cast<uint32_t>(seed) + 17);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  float* p = model.params();
  for (const auto& tensor : model.layout().tensors())
    if (tensor.shape.size() == 1)
      for (size_t i = 0; i < tensor.size(); ++i) p[tensor.offset + i] += noise(rng);
}

}  // namespace dseek::testing
