// The part of a PipelineChunk (pipeline/chunk.hpp) that only hands calls to the model
// it wraps: both model kinds, GptModel over a layer range (pipeline/chunk_whole.cpp) and
// a TensorParallelGpt shard of one (pipeline/chunk_tensor.cpp), have the same calls for
// running a range, its buffers and its activation slots. What differs between them, the
// ranges they own, count in the norm and gather, stays in each chunk.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "runtime/metrics/trace_spans.hpp"
#include "runtime/train/pipeline/chunk.hpp"

namespace dseek::train {

template <class Model>
class ModelChunk : public PipelineChunk {
 public:
  model::LayerRange range() const override { return model_.range(); }
  bool has_embedding() const override { return model_.has_embedding(); }
  bool has_head() const override { return model_.has_head(); }
  float* params() override { return model_.params(); }
  float* grads() override { return model_.grads(); }
  size_t buffer_floats() const override { return model_.num_params(); }
  void zero_grads() override { model_.zero_grads(); }
  model::ActivationMemory activation_memory() const override { return model_.activation_memory(); }
  void select_activation_slot(int64_t slot) override { model_.select_activation_slot(slot); }
  double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) override {
    const metrics::ScopedSpan span("forward", "forward");
    return model_.forward(tokens, targets, B, T);
  }
  void backward(float dloss, const model::GradientsReady& on_ready) override {
    const metrics::ScopedSpan span("backward", "backward");
    if constexpr (requires { model_.backward(dloss, on_ready); }) {
      model_.backward(dloss, on_ready);
    } else {
      model_.backward(dloss);
      if (on_ready)
        for (const model::ParamRange& range : this->owned_ranges()) on_ready(range);
    }
  }
  void end_precision_step() override { model_.precision().end_step(); }
  numerics::DelayedScalingState fp8_state() override { return model_.precision().fp8_state(); }
  void restore_fp8_state(const numerics::DelayedScalingState& state) override {
    model_.precision().restore_fp8_state(state);
  }
  float* stage_input() override { return model_.stage_input(); }
  float* stage_output() override { return model_.stage_output(); }
  float* stage_input_grad() override { return model_.stage_input_grad(); }
  float* stage_output_grad() override { return model_.stage_output_grad(); }
  void share_recompute_scratch(PipelineChunk& owner) override {
    auto* same_kind = dynamic_cast<ModelChunk*>(&owner);
    if (same_kind == nullptr)
      throw std::logic_error("pipeline chunk: recompute scratch shared between model kinds");
    model_.share_recompute_scratch(same_kind->model_);
  }

 protected:
  template <class... Args>
  explicit ModelChunk(Args&&... model_args) : model_(std::forward<Args>(model_args)...) {}

  Model model_;
};

}  // namespace dseek::train
