// check_supported(): the combinations a config file can express that no job runs (a
// fault with nothing to act on, NCCL without a GPU, pipeline keys without a pipeline):
// a job asking for one fails once, naming the key, instead of silently running without
// it.
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/load.hpp"
#include "runtime/config/schema.hpp"

namespace dseek::config {

namespace {

struct Gate {
  bool requested;
  std::string_view key;
  std::string reason;
};

// corrupt_gradient is caught by comparing replicas: it needs a multi-node job and a step;
// fail_checkpoint_write fails the checkpoint of a step; fail_connect a data plane, which
// only a job of several ranks has.
bool has_fault_without_a_target(const JobConfig& config) {
  for (const auto& fault : config.faults) {
    if (fault.kind == FaultKind::corrupt_gradient && (fault.step < 0 || config.cluster.nodes < 2))
      return true;
    if (fault.kind == FaultKind::fail_checkpoint_write && fault.step < 0) return true;
    if (fault.kind == FaultKind::fail_connect &&
        config.cluster.nodes * config.cluster.gpus_per_node < 2)
      return true;
  }
  return false;
}

// The actor a crash_actor target names, without its worker group ("pipeline_stage@1":
// "pipeline_stage").
std::string_view actor_of_target(std::string_view target) {
  return target.substr(0, target.find('@'));
}

// A pipeline or tensor-parallel job injects every fault a data-parallel one does (the
// node's actors, the worker group's, the stage trainer's hooks and its data group's
// reducer: actors/control/epoch_loop.hpp) but two that need replicas: the
// data group's reduction is where during = "reduction" fires, and its checksums are
// what catch corrupt_gradient.
bool has_fault_without_replicas(const JobConfig& config) {
  if (config.parallel.data > 1) return false;
  for (const auto& fault : config.faults)
    if (fault.during == FaultDuring::reduction || fault.kind == FaultKind::corrupt_gradient)
      return true;
  return false;
}

// The gradient_shard actors run an offloaded optimizer only (train.offload).
bool crashes_a_missing_shard(const JobConfig& config) {
  if (optimizer_offloaded(config)) return false;
  for (const auto& fault : config.faults)
    if (fault.kind == FaultKind::crash_actor && actor_of_target(fault.actor) == "gradient_shard")
      return true;
  return false;
}

// Only a pipeline or tensor-parallel job has a pipeline_stage actor to crash.
bool crashes_a_missing_stage(const JobConfig& config) {
  for (const auto& fault : config.faults)
    if (fault.kind == FaultKind::crash_actor && actor_of_target(fault.actor) == "pipeline_stage" &&
        config.parallel.pipeline < 2 && config.parallel.tensor < 2)
      return true;
  return false;
}

std::string message(const JobConfig& config, const Gate& gate) {
  const auto* key = schema::find(schema::job_keys(), gate.key);
  const std::string setting = key != nullptr
                                  ? std::string(gate.key) + " = " + schema::format_value(key->get(config))
                                  : "[[" + std::string(gate.key) + "]]";
  return config.source + ": " + setting + ": this job cannot run (" + gate.reason + ")";
}

}  // namespace

void check_supported(const JobConfig& config) {
  const bool fixed_world = config.parallel.tensor > 1 || config.parallel.pipeline > 1;
  const Gate gates[] = {
      {fixed_world && has_fault_without_replicas(config), "faults",
       "during = \"reduction\" fires in the data group's gradient reduction, and "
       "corrupt_gradient is caught by comparing replicas: a pipeline or tensor-parallel job "
       "has a data group only with parallel.data > 1"},
      {crashes_a_missing_stage(config), "faults",
       "crash_actor of the pipeline_stage: only a pipeline or tensor-parallel job "
       "(parallel.pipeline or parallel.tensor > 1) has that actor"},
      {crashes_a_missing_shard(config), "faults",
       "crash_actor of a gradient_shard: they run the optimizer offloaded to the CPU, and "
       "with train.offload = \"none\" (\"auto\" on a GPU) AdamW runs on the device "
       "instead; set train.offload = \"optimizer\" to have them"},
      {has_fault_without_a_target(config), "faults",
       "corrupt_gradient fires at a step of a multi-node job (it is caught by comparing "
       "replicas), fail_checkpoint_write at a step only, and fail_connect in a job of "
       "several ranks (it fails a data-plane connect)"},
      {config.parallel.pipeline == 1 && (config.parallel.schedule != Schedule::one_f_one_b ||
                                         config.parallel.virtual_stages != 1 ||
                                         config.parallel.micro_batches != 0 ||
                                         config.parallel.partition != Partition::uniform),
       "parallel.schedule",
       "parallel.schedule, parallel.virtual_stages, parallel.micro_batches and "
       "parallel.partition apply to pipeline-parallel jobs (parallel.pipeline > 1)"},
      // GPipe keeps every micro-batch's activations until its backward.
      {config.data.balance == Balance::throughput && config.parallel.pipeline > 1 &&
           config.parallel.schedule == Schedule::gpipe,
       "data.balance",
       "data.balance = \"throughput\" needs a schedule whose activations do not grow with "
       "the share (parallel.schedule = \"1f1b\" or \"interleaved\"): GPipe keeps every "
       "micro-batch's until its backward, so a replica's memory would follow its share"},
      // NCCL reduces the GPU's memory in place (actors/control/data_plane_link.hpp; a
      // build without NCCL refuses it at the node's start).
      {config.comm.backend == CommBackend::nccl && config.train.device != Device::cuda, "comm.backend",
       "the NCCL data plane reduces GPU memory: it needs train.device = \"cuda\"; use "
       "comm.backend = \"ucx\" on the CPU"},
      // NCCL's reduced gradients stay on the GPU, and AdamW runs there.
      {config.comm.backend == CommBackend::nccl && config.train.offload == Offload::optimizer,
       "train.offload",
       "with comm.backend = \"nccl\" the gradients are reduced in GPU memory and AdamW "
       "runs there; an optimizer offloaded to the CPU is built for the UCX data plane: "
       "use train.offload = \"none\" or \"auto\", or comm.backend = \"ucx\""},
      // Several worker groups a node (cluster.gpus_per_node): in a pipeline or
      // tensor-parallel job each is one rank of the data x pipeline x tensor world
      // (parallel.data counts its replicas); a data-parallel job's degree is the world.
      {config.cluster.gpus_per_node > 1 && config.parallel.data > 1 && !fixed_world,
       "cluster.gpus_per_node",
       "a data-parallel job with cluster.gpus_per_node > 1 trains on every rank of the "
       "world (cluster.nodes x cluster.gpus_per_node): leave parallel.data at 1 (it counts "
       "the replicas of a pipeline or tensor-parallel group)"},
  };
  for (const auto& gate : gates)
    if (gate.requested) throw ConfigError(message(config, gate));
}

}  // namespace dseek::config
