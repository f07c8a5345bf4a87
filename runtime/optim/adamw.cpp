// Implementation of adamw.hpp.
#include "runtime/optim/adamw.hpp"

#include <cmath>

namespace dseek::optim {

AdamW::AdamW(backend::Backend& backend, const model::ParamLayout& layout, AdamWSettings settings)
    : backend_(backend), settings_(settings), total_(layout.total()),
      m_(backend, layout.total()), v_(backend, layout.total()) {
  for (const auto& tensor : layout.tensors()) {
    if (!runs_.empty() && runs_.back().decay == tensor.decay &&
        runs_.back().offset + runs_.back().size == tensor.offset) {
      runs_.back().size += tensor.size();
    } else {
      runs_.push_back({tensor.offset, tensor.size(), tensor.decay});
    }
  }
}

StepStats AdamW::step(float* params, const float* grads, double lr) {
  StepStats stats;
  stats.grad_norm = std::sqrt(backend_.sum_squares(grads, total_));
  if (settings_.grad_clip > 0.0 && stats.grad_norm > settings_.grad_clip)
    stats.clip_scale = settings_.grad_clip / (stats.grad_norm + 1e-6);
  ++step_;
  for (const Run& run : runs_) {
    backend_.adamw_update(params + run.offset, grads + run.offset, m_.data() + run.offset,
                          v_.data() + run.offset, run.size, static_cast<float>(lr),
                          static_cast<float>(settings_.beta1), static_cast<float>(settings_.beta2),
                          static_cast<float>(settings_.eps),
                          run.decay ? static_cast<float>(settings_.weight_decay) : 0.0f, step_,
                          static_cast<float>(stats.clip_scale));
  }
  return stats;
}

}  // namespace dseek::optim
