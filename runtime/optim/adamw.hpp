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
//
// Given second moment (for compressed gradients, see AdamWSettings::
// given_second_moment_after): after a number of steps the optimizer stops updating v from
// the gradients it is handed and uses the v it is given with set_second_moment() (an
// estimate from the replicas' dense local gradients, refreshed every few steps by
// dist/comm_gradient_reducer.hpp). With v fixed, the update is linear in the
// first moment, so a coordinate whose gradient arrives K steps late (top-k with error
// feedback) still moves by the sum of its K steps of gradient; with v taken from those
// late, bunched arrivals it would move ~1/sqrt(K) as far (Tang et al. 2021, 1-bit Adam,
// freeze the variance for the same reason). A fixed v also no longer shrinks the steps
// when gradients grow between refreshes (early in training they change fast), so the
// update of each tensor is capped at an RMS of 1, as Adafactor caps its updates when its
// slowly decaying v lags (given_update_rms).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  // -1: v is the running average of the squared gradients (standard AdamW). N >= 0: the
  // first N steps as standard; from step N+1 on, v is what set_second_moment() last gave
  // (already bias-corrected) and the gradients do not change it; on any backend
  // (Backend::adamw_given_moment_update).
  int64_t given_second_moment_after = -1;
  // With a given second moment: the RMS of one tensor's update m / sqrt(v) is capped at
  // this (Adafactor's update clipping, d = 1; adamw.cpp). 0 = no cap.
  double given_update_rms = 1.0;
  // beta1 of the steps with a given second moment (>= 0; the first
  // given_second_moment_after steps use beta1). -1 = beta1.
  double given_beta1 = -1.0;
};

// A range of the flat buffer with the weight-decay setting of the tensor it lies in, for
// buffers ParamLayout does not describe (a tensor-parallel shard,
// model/tensor_parallel_layout.hpp).
struct DecayRange {
  model::ParamRange range;
  bool decay = false;
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
  // Only `owned`, each range with its decay setting given (disjoint ranges, each inside
  // one tensor; std::invalid_argument otherwise). A given second moment caps each range's
  // update by its own RMS (a tensor-parallel rank caps its slice of a tensor).
  AdamW(backend::Backend& backend, AdamWSettings settings, const std::vector<DecayRange>& owned);

  // One update of the owned params from grads at learning rate lr, clipping by the norm
  // of the owned gradients (the global norm for a whole-buffer optimizer). params and
  // grads are the whole flat buffers. Counts steps from 1.
  StepStats step(float* params, const float* grads, double lr);
  // The same with the norm of the whole gradient given (computed across shards).
  // `loss_scale`: the gradients are still multiplied by this power of two (dynamic loss
  // scaling, loss_scaler.hpp) and grad_norm is already unscaled; the update divides it
  // out on the backend, so device-resident gradients need no host unscaling pass.
  // `after_run`, when set, is called after each contiguous run of the update with the
  // flat offset just past it: the owned parameters below that offset, in the order of
  // the owned ranges, are updated (the CPU offload's overlap reports chunks from it).
  using RunDone = std::function<void(size_t end)>;
  StepStats step_with_norm(float* params, const float* grads, double lr, double grad_norm,
                           float loss_scale = 1.0f, const RunDone& after_run = {});

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
  // The second moment to use from now on (given_second_moment_after >= 0): a whole-buffer
  // host array in layout order, bias-corrected; only the owned ranges are read.
  void set_second_moment(const float* second_moment);
  // The step uses a given second moment (see AdamWSettings::given_second_moment_after).
  bool uses_given_second_moment() const;

 private:
  struct Run {  // a contiguous range with one decay setting
    size_t offset;         // into params and grads
    size_t moment_offset;  // into m_ and v_
    size_t size;
    bool decay;
  };
  void plan_runs(const model::ParamLayout& layout);
  void step_with_given_second_moment(float* params, const float* grads, double lr,
                                     float clip_scale, const RunDone& after_run);
  float given_beta1() const;

  backend::Backend& backend_;
  AdamWSettings settings_;
  std::vector<model::ParamRange> owned_;
  size_t owned_count_ = 0;
  std::vector<Run> runs_;
  backend::DeviceBuffer<float> m_, v_;
  int64_t step_ = 0;
  // v holds a value to use (given, or restored from a snapshot): a step with a given
  // second moment refuses to run on the zero v of a fresh optimizer.
  bool second_moment_set_ = false;
};

}  // namespace dseek::optim
