// Implementation of pipeline_stage_training.hpp.
#include "actors/node/pipeline_stage_training.hpp"

#include "actors/node/fixed_world_training.hpp"
#include "actors/training/run_pipeline.hpp"

namespace dseek::actors {

job_finished run_pipeline_stage_training(const worker_setup& setup, caf::actor_system& sys,
                                         EpochBoard& board, const std::atomic<bool>& stop) {
  FixedWorldPath path{"pipeline", "pipeline-parallel", "pipeline stage", "stage",
                      [](comm::Communicator& communicator, const config::JobConfig& session,
                         const train::RunOptions& options) {
                        return run_pipeline(session, options, communicator).run;
                      }};
  return run_on_fixed_world(setup, sys, board, stop, path);
}

}  // namespace dseek::actors
