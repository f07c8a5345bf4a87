// The settings of a data-parallel gradient reduction and how a job config chooses them:
// the ZeRO stage (parallel.zero), gradient compression (comm.compression,
// comm.topk_fraction) and the bucket size. Settings no reduction can run are refused
// here, with the keys named, before any replica starts training.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/config/job_config.hpp"

namespace dseek::dist {

struct ReducerSettings {
  // 0: all-reduce of gradients, every replica runs the whole AdamW.
  // 1: optimizer state sharded: reduce-scatter of the gradients after backward, each
  //    replica updates its shard, then the parameters are all-gathered.
  // 2: as 1, with each bucket's reduce-scatter started as backward finishes it.
  int zero_stage = 0;
  config::Compression compression = config::Compression::none;
  double topk_fraction = 0.05;
  int64_t compression_warmup_steps = 0;  // steps reduced uncompressed before the codec
  // With a codec, > 0: every replica keeps the running average of its squared local
  // gradients (optim::LocalSecondMoment, beta2 as AdamW's) and the replicas average it
  // (all-reduce in bf16) at step compression_warmup_steps and every this many steps after;
  // the optimizer takes it as its second moment (refreshed_second_moment()). 0: off.
  int64_t variance_refresh_steps = 0;
  double beta2 = 0.95;
  // Gradient bytes per bucket (whole backward ranges are never split; ~one GPT block
  // per bucket at GPT-2 small sizes).
  size_t bucket_bytes = size_t{4} << 20;
  // The communicator reads and writes the compute backend's memory (comm.backend =
  // "nccl": NCCL on the GPU; in tests a BackendStagedCommunicator on the scrambled
  // device): the reducer works on the trainer's own gradient buffer, nothing is staged
  // through host memory. false: the communicator moves host memory (UCX); always so
  // with a codec, which encodes in host memory.
  bool backend_memory = false;
  // Called (with the step) once the step's first bucket is on the wire: fault injection
  // "during the reduction" (a kill or hang while the peers are mid-collective).
  std::function<void(int64_t step)> after_first_bucket;
};

// The settings of `config`; throws config::ConfigError (naming the keys) for
// settings no reduction runs (a ZeRO stage or step count out of range).
ReducerSettings reducer_settings(const config::JobConfig& config);

// The same checks on settings built by hand (std::invalid_argument).
void check_reducer_settings(const ReducerSettings& settings);

}  // namespace dseek::dist
