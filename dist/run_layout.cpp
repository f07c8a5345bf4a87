// Implementation of run_layout.hpp.
#include "dist/run_layout.hpp"

#include <memory>

#include "dist/comm_pipeline_links.hpp"
#include "dist/comm_replica_group.hpp"
#include "dist/comm_tensor_group.hpp"
#include "dist/parallel_communicators.hpp"
#include "dist/stage_memory_sync.hpp"
#include "runtime/train/layout/parallel_groups.hpp"
#include "runtime/train/pipeline/single_stage_links.hpp"

namespace dseek::dist {

train::PipelineRunSummary run_layout(const config::JobConfig& config,
                                     const train::RunOptions& options, comm::Communicator& comm,
                                     ReducerSettings settings, comm::Communicator* device) {
  // A data-parallel job leaves parallel.data at 1: its replicas are the world's ranks.
  config::JobConfig session = config;
  session.parallel.data = comm.size() / (config.parallel.pipeline * config.parallel.tensor);
  const train::ParallelGroups layout(static_cast<int>(session.parallel.data),
                                     static_cast<int>(session.parallel.pipeline),
                                     static_cast<int>(session.parallel.tensor));
  ParallelCommunicators groups = cut_parallel_groups(comm, layout);
  // The same groups on the device plane, cut in the same order on every rank.
  ParallelCommunicators on_device;
  if (device != nullptr) on_device = cut_parallel_groups(*device, layout);
  comm::Communicator* device_data = settings.backend_memory ? on_device.data.get() : nullptr;
  train::RunOptions run = options;
  // Without a pipeline the rank is the only stage.
  train::SingleStageLinks one_stage;
  std::unique_ptr<CommPipelineLinks> stage_links;
  if (groups.pipeline)
    stage_links = std::make_unique<CommPipelineLinks>(*groups.pipeline, on_device.pipeline.get());
  train::PipelineLinks& links = stage_links ? static_cast<train::PipelineLinks&>(*stage_links)
                                            : one_stage;
  std::unique_ptr<CommReplicaGroup> replicas;
  if (groups.data) {
    if (!settings.after_first_bucket) settings.after_first_bucket = options.during_reduction;
    replicas = std::make_unique<CommReplicaGroup>(*groups.data, std::move(settings), device_data);
  }
  std::unique_ptr<CommTensorGroup> tensor;
  if (groups.tensor) tensor = std::make_unique<CommTensorGroup>(*groups.tensor, on_device.tensor.get());
  CommStageMemorySync memory_sync(session, comm, groups.data.get());
  return train::run_pipeline_stage(session, run, links, replicas.get(), tensor.get(), &memory_sync);
}

}  // namespace dseek::dist
