// check_supported(): the settings this build accepts in a file but cannot run yet.
// This build trains single-node, fp32, on the CPU. Each feature that lands deletes its
// line below; until then a job asking for it fails loudly instead of silently running
// without it.
#include <string>

#include "runtime/config/load.hpp"
#include "runtime/config/schema.hpp"

namespace dseek::config {

namespace {
// The node's actors inject kill, hang, crash_actor, drop_messages and slow (at a step or
// after a time); the trainer injects fail_checkpoint_write at a step, and
// corrupt_gradient at a step of a multi-node job (the replicas' checksums catch it).
bool has_unsupported_fault(const JobConfig& config) {
  for (const auto& fault : config.faults) {
    if (fault.kind == "corrupt_gradient" && (fault.step < 0 || config.cluster.nodes < 2))
      return true;
    if (fault.kind == "fail_checkpoint_write" && fault.step < 0) return true;
  }
  return false;
}

bool has_fault_other_than_kill(const JobConfig& config) {
  for (const auto& fault : config.faults)
    if (fault.kind != "kill") return true;
  return false;
}
}  // namespace

void check_supported(const JobConfig& config) {
  struct Gate {
    bool requested;
    std::string_view key;
    std::string_view reason;
  };
  const Gate gates[] = {
      // Tensor parallelism runs one tensor-parallel rank per node
      // (train/run_tensor_parallel.hpp); what it does not combine with yet:
      {config.parallel.tensor > 1 && config.parallel.pipeline > 1, "parallel.pipeline",
       "tensor parallelism (parallel.tensor > 1) does not combine with pipeline "
       "parallelism yet"},
      {config.parallel.tensor > 1 && config.parallel.data > 1, "parallel.data",
       "tensor parallelism (parallel.tensor > 1) does not combine with data "
       "parallelism yet"},
      {config.parallel.tensor > 1 && config.parallel.zero > 0, "parallel.zero",
       "ZeRO shards a data-parallel optimizer: not with parallel.tensor > 1"},
      {config.parallel.tensor > 1 && config.comm.compression != "none", "comm.compression",
       "gradient compression is for data-parallel reductions: not with parallel.tensor > 1"},
      {config.parallel.tensor > 1 && config.checkpoint.every_steps > 0,
       "checkpoint.every_steps", "checkpoints of tensor-parallel jobs are not written yet"},
      {config.parallel.tensor > 1 && !config.checkpoint.resume.empty(), "checkpoint.resume",
       "checkpoints of tensor-parallel jobs are not written yet"},
      {config.parallel.tensor > 1 && has_fault_other_than_kill(config), "faults",
       "recovery of tensor-parallel jobs is not written yet: the only fault injected "
       "into them is kill, to check that the job fails at once"},
      // Pipeline parallelism runs one stage per node (train/run_pipeline_stage.hpp);
      // what it does not combine with yet:
      {config.parallel.pipeline > 1 && config.parallel.data > 1, "parallel.data",
       "pipeline parallelism (parallel.pipeline > 1) does not combine with data "
       "parallelism yet"},
      {config.parallel.pipeline > 1 && config.parallel.zero > 0, "parallel.zero",
       "ZeRO shards a data-parallel optimizer: not with parallel.pipeline > 1"},
      {config.parallel.pipeline > 1 && config.comm.compression != "none", "comm.compression",
       "gradient compression is for data-parallel reductions: not with parallel.pipeline > 1"},
      {config.parallel.pipeline > 1 && config.checkpoint.every_steps > 0,
       "checkpoint.every_steps", "checkpoints of pipeline-parallel jobs are not written yet"},
      {config.parallel.pipeline > 1 && !config.checkpoint.resume.empty(), "checkpoint.resume",
       "checkpoints of pipeline-parallel jobs are not written yet"},
      {config.parallel.pipeline > 1 && has_fault_other_than_kill(config), "faults",
       "recovery of pipeline-parallel jobs is not written yet: the only fault injected "
       "into them is kill, to check that the job fails at once"},
      {config.parallel.pipeline == 1 && (config.parallel.schedule != "1f1b" ||
                                         config.parallel.virtual_stages != 1 ||
                                         config.parallel.micro_batches != 0 ||
                                         config.parallel.partition != "uniform"),
       "parallel.schedule", "parallel.schedule, parallel.virtual_stages, "
       "parallel.micro_batches and parallel.partition apply to pipeline-parallel jobs "
       "(parallel.pipeline > 1)"},
      {config.comm.backend != "ucx", "comm.backend",
       "the NCCL data plane comes with the GPU backend"},
      {config.metrics.prometheus_port != 0, "metrics.prometheus_port",
       "the /metrics endpoint is not written yet"},
      {config.train.precision != "fp32", "train.precision",
       "bf16 and fp8 come with the GPU backend"},
      {has_unsupported_fault(config), "faults",
       "corrupt_gradient fires at a step of a multi-node job (it is caught by comparing "
       "replicas), and fail_checkpoint_write at a step only"},
  };
  for (const auto& gate : gates) {
    if (!gate.requested) continue;
    const auto* key = schema::find(schema::job_keys(), gate.key);
    std::string setting = "[[" + std::string(gate.key) + "]]";
    if (key != nullptr) {
      setting = std::string(gate.key) + " = " + schema::format_value(key->get(config));
    }
    throw ConfigError(config.source + ": " + setting + ": not implemented yet in this build (" +
                      std::string(gate.reason) +
                      "); this build runs single-node fp32 CPU training only");
  }
}

}  // namespace dseek::config
