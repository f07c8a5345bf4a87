// Reproducible normally distributed floats for tests that need a buffer of plausible
// gradients or parameters (optimizer tests, shard tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace dseek::testing {

inline std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  return values;
}

}  // namespace dseek::testing
