// Implementation of tensor_parallel_training.hpp.
#include "actors/node/tensor_parallel_training.hpp"

#include <memory>

#include "actors/node/fixed_world_training.hpp"
#include "actors/training/comm_replica_group.hpp"
#include "actors/training/comm_tensor_group.hpp"
#include "actors/training/parallel_communicators.hpp"
#include "runtime/train/run_tensor_parallel.hpp"

namespace dseek::actors {

job_finished run_tensor_parallel_training(const worker_setup& setup, caf::actor_system& sys,
                                          EpochBoard& board, const std::atomic<bool>& stop) {
  FixedWorldPath path{"tensor-parallel group", "tensor-parallel", "tensor-parallel rank",
                      "tensor_rank",
                      [](comm::Communicator& communicator, const config::JobConfig& session,
                         const train::RunOptions& options) {
                        const train::ParallelGroups layout(
                            static_cast<int>(session.parallel.data), 1,
                            static_cast<int>(session.parallel.tensor));
                        ParallelCommunicators groups = cut_parallel_groups(communicator, layout);
                        CommTensorGroup group(*groups.tensor);
                        std::unique_ptr<CommReplicaGroup> replicas;
                        if (groups.data) replicas = std::make_unique<CommReplicaGroup>(*groups.data);
                        return train::run_tensor_parallel(session, options, group, replicas.get());
                      }};
  return run_on_fixed_world(setup, sys, board, stop, path);
}

}  // namespace dseek::actors
