// Implementation of run_training.hpp.
#include "runtime/train/run_training.hpp"

#include "runtime/train/pipeline/run_stage.hpp"
#include "runtime/train/pipeline/single_stage_links.hpp"

namespace dseek::train {

RunSummary run_training(const config::JobConfig& config, const RunOptions& options) {
  SingleStageLinks alone;
  return run_pipeline_stage(config, options, alone).run;
}

}  // namespace dseek::train
