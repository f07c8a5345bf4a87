// Implementation of run_pipeline.hpp.
#include "actors/training/run_pipeline.hpp"

#include <memory>

#include "actors/training/comm_pipeline_links.hpp"
#include "actors/training/comm_replica_group.hpp"
#include "actors/training/comm_tensor_group.hpp"
#include "actors/training/parallel_communicators.hpp"
#include "runtime/train/parallel_groups.hpp"

namespace dseek::actors {

train::PipelineRunSummary run_pipeline(const config::JobConfig& config,
                                       const train::RunOptions& options, comm::Communicator& comm) {
  const train::ParallelGroups layout(static_cast<int>(config.parallel.data),
                                     static_cast<int>(config.parallel.pipeline),
                                     static_cast<int>(config.parallel.tensor));
  ParallelCommunicators groups = cut_parallel_groups(comm, layout);
  CommPipelineLinks links(*groups.pipeline);
  std::unique_ptr<CommReplicaGroup> replicas;
  if (groups.data) replicas = std::make_unique<CommReplicaGroup>(*groups.data);
  std::unique_ptr<CommTensorGroup> tensor;
  if (groups.tensor) tensor = std::make_unique<CommTensorGroup>(*groups.tensor);
  return train::run_pipeline_stage(config, options, links, replicas.get(), tensor.get());
}

}  // namespace dseek::actors
