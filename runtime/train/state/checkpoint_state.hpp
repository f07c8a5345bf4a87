// CheckpointState: what a trainer offers to state/checkpointing.hpp, which writes the
// whole, unsharded model state in the ordinary checkpoint format and resumes from one
// written by any layout. Implemented by state/stage_checkpoint_state.hpp for every layout
// (the ranks each hold a piece of the model, moved on the data plane to world rank 0).
// This interface only says who takes part and in what order.
#pragma once

#include <cstdint>

#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::train {

// The sizes of a job's parallel layout, recorded in a checkpoint's manifest.
struct LayoutSizes {
  uint32_t data = 1, pipeline = 1, tensor = 1;
  uint32_t zero = 0;  // the ZeRO stage whose sharded moments a snapshot gathers
  uint32_t world() const { return data * pipeline * tensor; }
};

class CheckpointState {
 public:
  virtual ~CheckpointState() = default;
  // The whole model's flat layout (params, adam_m and adam_v are in its order).
  virtual const model::ParamLayout& whole_layout() const = 0;
  virtual LayoutSizes sizes() const = 0;
  // World rank 0: receives the gathered state and writes it.
  virtual bool is_writer() const = 0;
  // The ranks of replica 0 (every replica holds the same bits): each snapshot is a
  // collective over them; the other replicas skip it, unless they hold something of
  // their own (ZeRO's moment pieces; under fp8 their amax histories).
  virtual bool takes_part() const = 0;
  // The writer's `value` on every rank that takes part (collective over them).
  virtual bool writer_decides(bool value) = 0;
  // Collective over the ranks that take part: the writer gets the whole state in its
  // three buffers (whole_layout().total() floats each); the others pass null.
  virtual void gather_whole(float* params, float* adam_m, float* adam_v) = 0;
  // Every rank takes its own pieces (params and moments) out of the whole state.
  virtual void restore_whole(const float* params, const float* adam_m, const float* adam_v,
                             int64_t optimizer_steps) = 0;
  virtual int64_t optimizer_steps() const = 0;
  // The mixed-precision state (checkpoint/precision_state.hpp), collective over the ranks
  // that take part, after gather_whole: the writer's holds the loss scaler's state and
  // every rank's fp8 state (train/state/sharded_precision_state.hpp), the others' is not used.
  virtual checkpoint::PrecisionState gather_precision_state() = 0;
  // Every rank puts back the loss scaler's state and its fp8 state out of `state`, written
  // by layout `written_by`: returns true when it took its own copy, false when merged.
  virtual bool restore_precision_state(const checkpoint::PrecisionState& state,
                                       const LayoutSizes& written_by) = 0;
  // The sum of `value` over every rank of the world (collective).
  virtual double sum_over_world(double value) = 0;
};

}  // namespace dseek::train
