// Counter-based random numbers for weight initialisation: the value of parameter i is a
// pure function of (seed, i), so a model built whole, by pipeline stage or by shard
// starts from the same weights, whatever the layout of the job.
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/util/splitmix64.hpp"

namespace dseek::model {

using util::splitmix64;

// A standard normal sample for (seed, index), by Box-Muller on two 53-bit uniforms.
inline double normal_at(uint64_t seed, uint64_t index) {
  const uint64_t a = splitmix64(splitmix64(seed) ^ (2 * index));
  const uint64_t b = splitmix64(splitmix64(seed) ^ (2 * index + 1));
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace dseek::model
