// Implementation of pipeline_stage_training.hpp.
#include "actors/node/pipeline_stage_training.hpp"

#include "actors/node/fixed_world_training.hpp"

namespace dseek::actors {

job_finished run_pipeline_stage_training(const worker_setup& setup, caf::actor_system& sys,
                                         EpochBoard& board, const std::atomic<bool>& stop) {
  return run_on_fixed_world(setup, sys, board, stop, {"pipeline", "pipeline stage"});
}

}  // namespace dseek::actors
