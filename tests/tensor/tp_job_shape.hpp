// The small model and training settings the tensor-parallel parity job uses, shared by
// the rank program (tp_rank_main.cpp) and the test that checks its outputs.
#pragma once

#include <cstdint>

#include "runtime/model/param_layout.hpp"

namespace dseek::testing::tp {

inline const model::GptShape kShape{.dim = 64, .layers = 2, .heads = 4, .context = 32, .vocab = 128};
inline constexpr int64_t kBatch = 4;
inline constexpr uint64_t kSeed = 1234;
inline constexpr double kInitStd = 0.02;
inline constexpr float kLearningRate = 2e-3f;

}  // namespace dseek::testing::tp
