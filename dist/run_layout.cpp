// Implementation of run_layout.hpp.
#include "dist/run_layout.hpp"

#include "dist/run_data_parallel.hpp"
#include "dist/run_pipeline.hpp"

namespace dseek::dist {

train::PipelineRunSummary run_layout(const config::JobConfig& config,
                                     const train::RunOptions& options, comm::Communicator& comm,
                                     ReducerSettings settings, comm::Communicator* device) {
  if (config.parallel.pipeline > 1 || config.parallel.tensor > 1)
    return run_pipeline(config, options, comm, std::move(settings), device);
  train::PipelineRunSummary summary;
  summary.run = run_data_parallel(config, options, comm, std::move(settings), device);
  return summary;
}

}  // namespace dseek::dist
