// Implementation of lr_schedule.hpp.
#include "runtime/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace dseek::optim {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress =
      std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  return min + 0.5 * (peak - min) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace dseek::optim
