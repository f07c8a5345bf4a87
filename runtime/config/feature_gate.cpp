// check_supported(): the settings this build accepts in a file but cannot run yet.
// This build trains single-node, fp32, on the CPU. Each feature that lands deletes its
// line below; until then a job asking for it fails loudly instead of silently running
// without it.
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/load.hpp"
#include "runtime/config/schema.hpp"

namespace dseek::config {

namespace {
// The node's actors inject kill, hang, crash_actor, drop_messages and slow (at a step or
// after a time); the trainer injects fail_checkpoint_write at a step, and
// corrupt_gradient at a step of a multi-node job (the replicas' checksums catch it).
bool has_unsupported_fault(const JobConfig& config) {
  for (const auto& fault : config.faults) {
    if (fault.kind == config::FaultKind::corrupt_gradient && (fault.step < 0 || config.cluster.nodes < 2))
      return true;
    if (fault.kind == config::FaultKind::fail_checkpoint_write && fault.step < 0) return true;
  }
  return false;
}

// The actor a crash_actor target names, without its worker group ("pipeline_stage@1":
// "pipeline_stage").
std::string_view actor_of_target(std::string_view target) {
  return target.substr(0, target.find('@'));
}

// A pipeline or tensor-parallel job injects kill and hang (the node is lost: the
// survivors re-plan the layout and resume from the newest checkpoint,
// actors/control/fixed_world_training.hpp), crash_actor of its pipeline_stage (which owns
// the stage trainer) or of a gradient_shard, which runs its chunks' optimizer updates
// (its worker group restarts and the job recovers the same way), corrupt_gradient with
// replicas (their checksums name the corrupted one, which leaves like a lost node), slow (the node sleeps as
// each step starts: the other ranks wait for it in the step's transfers), drop_messages
// (its heartbeats: declared lost while it runs on, the others re-plan as after a kill),
// and fail_checkpoint_write (its gathered checkpoint fails and training goes on);
// nothing else. during = "reduction" fires in the data-parallel gradient all-reduce,
// which these jobs do not run.
bool has_fault_a_fixed_world_lacks(const JobConfig& config) {
  for (const auto& fault : config.faults) {
    const std::string_view actor = actor_of_target(fault.actor);
    if (fault.kind == config::FaultKind::crash_actor && (actor == "pipeline_stage" || actor == "gradient_shard"))
      continue;
    // The data group's replica check catches it (pipeline/stage_trainer.hpp).
    if (fault.kind == config::FaultKind::corrupt_gradient && config.parallel.data > 1 && fault.during == config::FaultDuring::step)
      continue;
    if (fault.kind != config::FaultKind::kill && fault.kind != config::FaultKind::hang && fault.kind != config::FaultKind::slow &&
        fault.kind != config::FaultKind::drop_messages && fault.kind != config::FaultKind::fail_checkpoint_write)
      return true;
    if (fault.during != config::FaultDuring::step) return true;
  }
  return false;
}

// Only a pipeline or tensor-parallel job has a pipeline_stage actor to crash.
bool crashes_a_missing_stage(const JobConfig& config) {
  for (const auto& fault : config.faults)
    if (fault.kind == config::FaultKind::crash_actor && actor_of_target(fault.actor) == "pipeline_stage" &&
        config.parallel.pipeline < 2 && config.parallel.tensor < 2)
      return true;
  return false;
}

struct Gate {
  bool requested;
  std::string_view key;
  std::string reason;
};

// What a path that runs one rank per node of a fixed world (`key` "parallel.tensor" or
// "parallel.pipeline" > 1, `kind` "tensor" or "pipeline", with parallel.data replicas)
// does not combine with yet; each reason names the key that asked for the path.
void add_fixed_world_gates(std::vector<Gate>& gates, const JobConfig& config, bool requested,
                           std::string_view key, std::string_view kind) {
  const std::string asked = std::string(key) + " > 1";
  const std::string jobs = std::string(kind) + "-parallel jobs";
  // comm.compression and parallel.zero work on both paths: the data group reduces
  // through the data-parallel GradientReducer (train/pipeline/stage_trainer.hpp).
  // checkpoint.every_steps and checkpoint.resume work on both paths: the ranks gather
  // the whole state to world rank 0 (train/state/gathered_checkpointing.hpp).
  std::string injected = "kill and hang (the survivors re-plan the layout and resume from "
                         "the newest checkpoint), crash_actor of the pipeline_stage or a "
                         "gradient_shard (the same), corrupt_gradient with parallel.data > 1 "
                         "(the replicas' checksums catch it), ";
  injected += "slow (the node sleeps that long as each step starts, from then on), "
              "drop_messages (its heartbeats: it is declared lost), and fail_checkpoint_write, "
              "at a step boundary or after_seconds (not during = \"reduction\")";
  gates.push_back({requested && has_fault_a_fixed_world_lacks(config), "faults",
                   "the faults injected into " + jobs + " are " + injected +
                   "; the others are not wired into these jobs"});
  // train.device works on these layouts: the stages and tensor ranks compute on the
  // device and stage what the host data plane moves (pipeline/stage_trainer.hpp).
}
}  // namespace

void check_supported(const JobConfig& config) {
  const bool tensor = config.parallel.tensor > 1;
  const bool pipeline = config.parallel.pipeline > 1;
  std::vector<Gate> gates;
  // Pipeline and tensor parallelism run one rank of the stage trainer per worker group
  // (train/pipeline/run_stage.hpp: a stage, a tensor rank, or a tensor rank of a stage;
  // without a pipeline the rank is the only stage), with parallel.data replicas, on
  // cluster.gpus_per_node worker groups a node; what they do not combine with yet:
  add_fixed_world_gates(gates, config, tensor, "parallel.tensor", "tensor");
  add_fixed_world_gates(gates, config, pipeline, "parallel.pipeline", "pipeline");
  const Gate other_gates[] = {
      {config.parallel.pipeline == 1 && (config.parallel.schedule != config::Schedule::one_f_one_b ||
                                         config.parallel.virtual_stages != 1 ||
                                         config.parallel.micro_batches != 0 ||
                                         config.parallel.partition != config::Partition::uniform),
       "parallel.schedule", "parallel.schedule, parallel.virtual_stages, "
       "parallel.micro_batches and parallel.partition apply to pipeline-parallel jobs "
       "(parallel.pipeline > 1)"},
      // NCCL reduces the GPU's memory in place: a data-parallel job on CUDA
      // (actors/control/data_plane_link.hpp; a build without NCCL refuses it at the node's
      // start). The fixed-world paths have their own communicators over UCX.
      {config.comm.backend == config::CommBackend::nccl && config.train.device != config::Device::cuda, "comm.backend",
       "the NCCL data plane reduces GPU memory: it needs train.device = \"cuda\"; use "
       "comm.backend = \"ucx\" on the CPU"},
      {config.comm.backend == config::CommBackend::nccl && (tensor || pipeline), "comm.backend",
       "the NCCL data plane carries data-parallel gradients only so far: tensor- and "
       "pipeline-parallel jobs (parallel.tensor or parallel.pipeline > 1) run over "
       "comm.backend = \"ucx\""},
      {config.comm.backend == config::CommBackend::nccl && config.comm.compression != config::Compression::none, "comm.compression",
       "the gradient codecs encode in host memory and NCCL reduces GPU memory: use "
       "comm.compression = \"none\" with comm.backend = \"nccl\""},
      // fp8 with comm.compression runs where compression does (data parallel, ZeRO 0,
      // UCX): the trainer decides the loss-scaled step and unscales the gradients before
      // any codec sees them (runtime/train/trainer_unscaled_reduction.cpp).
      // Several worker groups a node (cluster.gpus_per_node): in a pipeline or
      // tensor-parallel job each is one rank of the data x pipeline x tensor world
      // (parallel.data counts its replicas); a data-parallel job's degree is the world.
      {config.cluster.gpus_per_node > 1 && config.parallel.data > 1 && !tensor && !pipeline,
       "cluster.gpus_per_node",
       "a data-parallel job with cluster.gpus_per_node > 1 trains on every rank of the "
       "world (cluster.nodes x cluster.gpus_per_node): leave parallel.data at 1 (it counts "
       "the replicas of a pipeline or tensor-parallel group)"},
      {crashes_a_missing_stage(config), "faults",
       "crash_actor of the pipeline_stage: only a pipeline or tensor-parallel job "
       "(parallel.pipeline or parallel.tensor > 1) has "
       "that actor"},
      {has_unsupported_fault(config), "faults",
       "corrupt_gradient fires at a step of a multi-node job (it is caught by comparing "
       "replicas), and fail_checkpoint_write at a step only"},
  };
  gates.insert(gates.end(), std::begin(other_gates), std::end(other_gates));
  for (const auto& gate : gates) {
    if (!gate.requested) continue;
    const auto* key = schema::find(schema::job_keys(), gate.key);
    std::string setting = "[[" + std::string(gate.key) + "]]";
    if (key != nullptr) {
      setting = std::string(gate.key) + " = " + schema::format_value(key->get(config));
    }
    throw ConfigError(config.source + ": " + setting + ": not implemented yet in this build (" +
                      gate.reason + "); README.md says what runs today");
  }
}

}  // namespace dseek::config
