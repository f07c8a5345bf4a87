// Implementation of pipeline_stage_training.hpp.
#include "actors/node/pipeline_stage_training.hpp"

#include <string>

#include "actors/node/data_plane_link.hpp"
#include "actors/node/fixed_world_training.hpp"
#include "actors/node/pipeline_stage.hpp"
#include "actors/node/worker_restart.hpp"
#include "actors/training/run_pipeline.hpp"
#include "runtime/metrics/event_log.hpp"

namespace dseek::actors {

namespace {

// A restarted worker group (its pipeline_stage or its worker crashed): the coordinator's
// new epoch aborts the other stages' collectives (as after a crashed gradient_shard,
// worker_restart.hpp), and since a pipeline cannot take a stage back yet, the job fails
// here naming the stage, instead of this node waiting for a world that has gone.
job_finished fail_after_group_restart(const worker_setup& setup, caf::actor_system& sys) {
  const auto& config = setup.config;
  const auto fresh = announce_worker_restart(sys, config);
  std::string stage = "of this node's pipeline stage";
  if (fresh) {
    const int32_t rank = rank_in_plan(*fresh, config.cluster.node_id);
    // World rank = replica x P + stage (parallel_groups.hpp).
    if (rank >= 0) stage = "of pipeline stage " + std::to_string(rank % config.parallel.pipeline);
  }
  job_finished result;
  result.ok = false;
  result.error = "the worker group " + stage + " (node " +
                 std::to_string(config.cluster.node_id) +
                 ") was restarted after a crash in it (its pipeline_stage or worker actor; "
                 "see actor_restarted): recovery of pipeline-parallel jobs is not written yet";
  setup.events->emit("training_interrupted",
                     util::JsonLine().add("epoch", fresh ? fresh->epoch : std::uint64_t{0})
                         .add("error", result.error));
  return result;
}

}  // namespace

job_finished run_pipeline_stage_training(const worker_setup& setup, caf::actor_system& sys,
                                         EpochBoard& board, const std::atomic<bool>& stop) {
  if (setup.starts->load() > 1) return fail_after_group_restart(setup, sys);
  FixedWorldPath path{"pipeline", "pipeline-parallel", "pipeline stage", "stage",
                      [](comm::Communicator& communicator, const config::JobConfig& session,
                         const train::RunOptions& options) {
                        try {
                          return run_pipeline(session, options, communicator).run;
                        } catch (const pipeline_stage_lost&) {
                          // The worker group goes down: the communicator's orderly
                          // teardown would wait for the other stages, mid-step.
                          communicator.abort("this node's pipeline_stage actor is gone");
                          throw;
                        }
                      }};
  return run_on_fixed_world(setup, sys, board, stop, path);
}

}  // namespace dseek::actors
