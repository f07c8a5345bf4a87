// Implementation of layout_training.hpp.
#include "actors/node/layout_training.hpp"

#include <memory>

#include "actors/training/comm_replica_group.hpp"
#include "actors/training/comm_tensor_group.hpp"
#include "actors/training/parallel_communicators.hpp"
#include "actors/training/run_data_parallel.hpp"
#include "actors/training/run_pipeline.hpp"
#include "runtime/train/run_tensor_parallel.hpp"

namespace dseek::actors {

namespace {

train::RunSummary train_tensor_parallel(comm::Communicator& communicator,
                                        const config::JobConfig& session,
                                        const train::RunOptions& options) {
  const train::ParallelGroups layout(static_cast<int>(session.parallel.data), 1,
                                     static_cast<int>(session.parallel.tensor));
  ParallelCommunicators groups = cut_parallel_groups(communicator, layout);
  CommTensorGroup group(*groups.tensor);
  std::unique_ptr<CommReplicaGroup> replicas;
  if (groups.data) replicas = std::make_unique<CommReplicaGroup>(*groups.data);
  return train::run_tensor_parallel(session, options, group, replicas.get());
}

}  // namespace

train::RunSummary train_on_layout(const train::SurvivorLayout& layout,
                                  comm::Communicator& communicator,
                                  const config::JobConfig& session,
                                  const train::RunOptions& options) {
  if (layout.pipeline > 1) return run_pipeline(session, options, communicator).run;
  if (layout.tensor > 1) return train_tensor_parallel(communicator, session, options);
  return run_data_parallel(session, options, communicator);
}

}  // namespace dseek::actors
