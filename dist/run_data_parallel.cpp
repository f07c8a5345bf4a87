// Implementation of run_data_parallel.hpp.
#include "dist/run_data_parallel.hpp"

#include <memory>

#include "dist/comm_gradient_reducer.hpp"
#include "dist/replica_memory.hpp"

namespace dseek::dist {

namespace {

// Faults that act in the step through the trainer's after-reduction hook: a corrupted
// gradient.
bool injects_into_gradients(const config::JobConfig& config) {
  for (const auto& fault : config.faults)
    if (fault.kind == config::FaultKind::corrupt_gradient) return true;
  return false;
}

}  // namespace

train::RunSummary run_data_parallel(const config::JobConfig& config, train::RunOptions options,
                                    comm::Communicator& comm, ReducerSettings settings,
                                    comm::Communicator* device) {
  if (!settings.after_first_bucket) settings.after_first_bucket = options.during_reduction;
  // Compressed gradients are encoded in host memory: they travel over the host plane.
  if (!settings.backend_memory) device = nullptr;
  std::unique_ptr<ReplicaMemory> memory;
  if (options.replica != nullptr) {
    memory = std::make_unique<ReplicaMemory>(config, comm, *options.replica,
                                             settings.bucket_bytes, options.events);
    const train::MemoryRecovery agreed = memory->agree();
    if (options.memory_recovery != nullptr) *options.memory_recovery = agreed;
    options.start_from = agreed.steps_done >= 0 ? options.replica : nullptr;
    options.after_step = [kept = memory.get(), inner = options.after_step](
                             int64_t steps_done, train::Trainer& trainer) {
      kept->after_step(steps_done, trainer);
      if (inner) inner(steps_done, trainer);
    };
  }
  if (device != nullptr) {
    // The fault hook edits host gradients: with the gradients on the GPU it costs a copy
    // down and up every step, so only a job that injects there keeps it.
    if (!injects_into_gradients(config)) options.after_reduction = nullptr;
    // AdamW runs on the GPU too (the trainer's own optimizer) instead of in the
    // CPU-offloaded gradient_shard actors, which would copy the reduced gradient down
    // and the parameters up every step.
    options.optimizer_shards = nullptr;
  }
  CommGradientReducer reducer(device != nullptr ? *device : comm, settings);
  options.reducer = &reducer;
  return train::run_training(config, options);
}

}  // namespace dseek::dist
