// Implementation of tensor_parallel_training.hpp.
#include "actors/node/tensor_parallel_training.hpp"

#include "actors/node/fixed_world_training.hpp"

namespace dseek::actors {

job_finished run_tensor_parallel_training(const worker_setup& setup, caf::actor_system& sys,
                                          EpochBoard& board, const std::atomic<bool>& stop) {
  return run_on_fixed_world(setup, sys, board, stop,
                            {"tensor-parallel group", "tensor-parallel rank"});
}

}  // namespace dseek::actors
