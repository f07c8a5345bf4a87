// AdamW over a flat parameter buffer: the first and second moments live in flat
// buffers of the same layout, and weight decay applies only to the tensors ParamLayout
// marks (matrices and embeddings, not biases or LayerNorm gains), as in GPT-2 and
// nanoGPT. Global-norm gradient clipping is folded into the update as a scale on the
// gradients, so the gradient buffer is read once.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::optim {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0 = no clipping
};

struct StepStats {
  double grad_norm = 0.0;   // before clipping
  double clip_scale = 1.0;  // applied to the gradients
};

class AdamW {
 public:
  AdamW(backend::Backend& backend, const model::ParamLayout& layout, AdamWSettings settings);

  // One update of params from grads at learning rate lr. Counts steps from 1.
  StepStats step(float* params, const float* grads, double lr);

  int64_t steps_taken() const { return step_; }
  // Resuming from a checkpoint: the step count drives the bias correction.
  void set_steps_taken(int64_t steps) { step_ = steps; }
  float* first_moment() { return m_.data(); }
  float* second_moment() { return v_.data(); }

 private:
  struct Run {  // a contiguous range of tensors with the same decay setting
    size_t offset, size;
    bool decay;
  };
  backend::Backend& backend_;
  AdamWSettings settings_;
  std::vector<Run> runs_;
  size_t total_;
  backend::DeviceBuffer<float> m_, v_;
  int64_t step_ = 0;
};

}  // namespace dseek::optim
