// The learning-rate schedule: linear warm-up from 0 to the peak over warmup_steps, then
// cosine decay to min_lr at the last step (nanoGPT's and Megatron's default shape).
#pragma once

#include <cstdint>

namespace dseek::optim {

struct LrSchedule {
  double peak = 1e-3;
  double min = 1e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // Learning rate of 0-based step `step`.
  double at(int64_t step) const;
};

}  // namespace dseek::optim
