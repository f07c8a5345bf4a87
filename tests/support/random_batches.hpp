// A train::BatchSource of random tokens (ids 0..63) that depend on (step, sequence) only,
// so every replica, micro-batch split and rerun of a test sees the same global batch:
// for the tests that drive the trainer in-process (loss scaling, the offload, compressed
// fp8 steps).
#pragma once

#include <cstdint>
#include <random>

#include "runtime/train/batch_source.hpp"

namespace dseek::testing {

class RandomBatches final : public train::BatchSource {
 public:
  void fill(uint64_t step, int64_t, int64_t first, int64_t count, int64_t context,
            int32_t* inputs, int32_t* targets) override {
    for (int64_t s = 0; s < count; ++s) {
      std::mt19937 rng(static_cast<uint32_t>(step * 1000 + static_cast<uint64_t>(first + s)));
      std::uniform_int_distribution<int32_t> id(0, 63);
      for (int64_t t = 0; t < context; ++t) {
        inputs[s * context + t] = id(rng);
        targets[s * context + t] = id(rng);
      }
    }
  }
};

}  // namespace dseek::testing
