// One rank's training on the layout its job trains in this epoch
// (train::SurvivorLayout: the configured one, or the one re-planned after a node loss),
// over the communicator of the layout's ranks: the stage trainer's rank
// (dist::run_pipeline: a pipeline stage, a tensor-parallel rank, or both) while the
// layout has a pipeline or a tensor group, and otherwise a data-parallel replica
// (dist::run_data_parallel), down to a single node. `session` is the job's config
// for that layout (train::config_for_layout).
#pragma once

#include "comm/communicator.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/layout/survivor_layout.hpp"

namespace dseek::actors {

train::RunSummary train_on_layout(const train::SurvivorLayout& layout,
                                  comm::Communicator& communicator,
                                  const config::JobConfig& session,
                                  const train::RunOptions& options);

}  // namespace dseek::actors
