// The pipeline_stage actor of a node's worker group (DESIGN.md: worker_group
// (one_for_all) with pipeline_stage and gradient_shard*): in a pipeline or
// tensor-parallel job (parallel.pipeline or parallel.tensor > 1; without a pipeline the
// rank is the only stage) it owns the node's stage -- its PipelineStageTrainer with the
// stage's layers [a,b) and their chunks, its optimizer, and the links it uses -- and
// does the stage's work one request at a time (worker_group/pipeline_stage_messages.hpp): build,
// train a step (the reply is the step report), evaluate, gather parameters, trace and
// checkpoint pieces, restore.
//
// It computes for seconds and blocks on the data plane inside a step (a receive waits
// for the neighbouring stage), so it runs detached, on a thread of its own: on CAF's
// shared scheduler it would stall every actor queued behind it (platform.md), the
// health monitor and the membership heartbeats included.
//
// The worker's training thread does not talk CAF: the run (train::run_pipeline_stage)
// gets a train::PipelineStage from pipeline_stage_for() through
// RunOptions::pipeline_stage and drives it exactly as it drives a LocalPipelineStage.
// That client builds the actor's trainer from the run's spec (whose references -- the
// links, the batches -- stay the run's, on its thread's stack, until the client releases
// the trainer in its destructor), then sends one request per call and waits for the
// answer, bounded.
//
// A pipeline_stage that crashes takes the worker group down with it (one_for_all): the
// worker watches it and fails at once (its training aborts its collectives), the
// supervisor restarts the whole group, and the restarted worker tells the coordinator
// (as after a crashed gradient_shard), whose new epoch aborts the peers' collectives.
// A request that finds the actor gone throws pipeline_stage_lost on the training thread.
// The job then recovers as from a lost node (control/epoch_loop.hpp).
#pragma once

#include <stdexcept>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/worker_group/pipeline_stage_messages.hpp"
#include "runtime/train/pipeline/stage.hpp"

namespace dseek::actors {

// The pipeline_stage actor a run relies on is gone (crashed, or restarted with the group).
struct pipeline_stage_lost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Spawns the pipeline_stage of worker group `local_rank` (detached); it registers under
// names::pipeline_stage_of(local_rank).
// `crash`: whether it obeys crash requests (the node's: crash_requests_of its job).
pipeline_stage_actor spawn_pipeline_stage(caf::actor_system& sys, int local_rank = 0,
                                          crash_requests crash = crash_requests::obeyed);

// Stages kept by `stage` (one run at a time).
train::PipelineStageFactory pipeline_stage_of(caf::actor_system& sys, pipeline_stage_actor stage);

// Stages kept by the pipeline_stage actor of the node's worker group `local_rank`, looked
// up when the run builds its stage. When none is running (a run outside the node's
// tree), the factory returns null: the run then keeps a LocalPipelineStage.
train::PipelineStageFactory pipeline_stage_for(caf::actor_system& sys, int local_rank = 0);

}  // namespace dseek::actors
