// AdamW over a flat parameter buffer: the first and second moments live in flat
// buffers of the same layout, and weight decay applies only to the tensors ParamLayout
// marks (matrices and embeddings, not biases or LayerNorm gains), as in GPT-2 and
// nanoGPT. Global-norm gradient clipping is folded into the update as a scale on the
// gradients, so the gradient buffer is read once.
//
// Sharded (ZeRO stage 1 and 2): an AdamW may own only some ranges of the flat buffer.
// It then allocates moments for those ranges only (packed, in the order given), updates
// only those parameters, and takes the global gradient norm from the caller (the norm
// of the whole gradient needs every shard). The update of an element is the same
// arithmetic whichever ranges an optimizer owns, so shards put together give the
// whole-buffer optimizer's parameters.
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
  // The whole buffer.
  AdamW(backend::Backend& backend, const model::ParamLayout& layout, AdamWSettings settings);
  // Only `owned`: disjoint ranges inside the layout (std::invalid_argument otherwise).
  AdamW(backend::Backend& backend, const model::ParamLayout& layout, AdamWSettings settings,
        std::vector<model::ParamRange> owned);

  // One update of the owned params from grads at learning rate lr, clipping by the norm
  // of the owned gradients (the global norm for a whole-buffer optimizer). params and
  // grads are the whole flat buffers. Counts steps from 1.
  StepStats step(float* params, const float* grads, double lr);
  // The same with the norm of the whole gradient given (computed across shards).
  StepStats step_with_norm(float* params, const float* grads, double lr, double grad_norm);

  int64_t steps_taken() const { return step_; }
  // Resuming from a checkpoint: the step count drives the bias correction.
  void set_steps_taken(int64_t steps) { step_ = steps; }

  const std::vector<model::ParamRange>& owned() const { return owned_; }
  size_t owned_count() const { return owned_count_; }
  // The packed moments: owned_count() floats, the owned ranges one after the other.
  float* first_moment() { return m_.data(); }
  float* second_moment() { return v_.data(); }
  // Moments to / from whole-buffer host arrays (layout order): only the owned ranges
  // are written / read.
  void moments_to_host(float* adam_m, float* adam_v);
  void moments_from_host(const float* adam_m, const float* adam_v);

 private:
  struct Run {  // a contiguous range with one decay setting
    size_t offset;         // into params and grads
    size_t moment_offset;  // into m_ and v_
    size_t size;
    bool decay;
  };
  void plan_runs(const model::ParamLayout& layout);

  backend::Backend& backend_;
  AdamWSettings settings_;
  std::vector<model::ParamRange> owned_;
  size_t owned_count_ = 0;
  std::vector<Run> runs_;
  backend::DeviceBuffer<float> m_, v_;
  int64_t step_ = 0;
};

}  // namespace dseek::optim
