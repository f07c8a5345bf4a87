// PipelineStageTrainer's state of one model chunk (pipeline/stage_trainer.hpp), shared
// by the trainer's implementation files (the step, state/stage_sharded_state.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "runtime/optim/adamw.hpp"
#include "runtime/train/gradient_reducer.hpp"
#include "runtime/train/host_staging.hpp"
#include "runtime/train/host_update.hpp"
#include "runtime/train/pipeline/chunk.hpp"
#include "runtime/train/pipeline/stage_trainer.hpp"

namespace dseek::train {

// One virtual stage of this worker: its layers, the ranges it owns and their AdamW,
// and which activation slot holds which micro-batch between forward and backward.
struct PipelineStageTrainer::Chunk {
  int64_t virtual_stage = 0;
  std::unique_ptr<PipelineChunk> model;
  std::vector<model::ParamRange> owned;       // its ranges, in backward order
  ChunkNormRanges norm_ranges;                // squared for the global norm (wte once)
  std::vector<model::ShardSegment> whole_segments;  // contributed to gather_params (wte once)
  std::vector<model::ParamRange> owned_runs;  // `owned` merged into contiguous runs (checksums)
  // The data group's reduction of `owned` (null with one replica): buckets, ZeRO's
  // reduce-scatter and all-gather, compression; every chunk has its own, on one plane.
  std::unique_ptr<GradientReducer> reducer;
  bool reduces_backend_memory = false;         // the reducer reads the backend's buffers
  std::vector<model::ParamRange> updated;      // `owned`, or under ZeRO the reducer's shard
  std::unique_ptr<OptimizerShards> optimizer;  // over `updated`
  size_t optimizer_floats = 0;                 // the parameters it holds moments of
  // The gradients' host copy for the host data plane (the tied wte's sum, the reducer's
  // buckets); on the CPU backend the gradients themselves.
  std::unique_ptr<HostStaging> grads_host;
  // The parameters' host copy: a host optimizer updates it, ZeRO's updated pieces are
  // all-gathered in it, checksums are taken on it.
  std::unique_ptr<HostStaging> params_host;
  std::unique_ptr<HostUpdate> update;  // `optimizer` over the staging, maybe overlapped
  int64_t last_backward = -1;          // the micro-batch of its last backward in a step
  std::vector<int64_t> free_slots;
  std::map<int64_t, int64_t> slot_of_micro_batch;
};

}  // namespace dseek::train
