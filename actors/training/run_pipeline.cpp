// Implementation of run_pipeline.hpp.
#include "actors/training/run_pipeline.hpp"

#include "actors/training/comm_pipeline_links.hpp"

namespace dseek::actors {

train::PipelineRunSummary run_pipeline(const config::JobConfig& config,
                                       const train::RunOptions& options, comm::Communicator& comm) {
  CommPipelineLinks links(comm);
  return train::run_pipeline_stage(config, options, links);
}

}  // namespace dseek::actors
