// Writing one checkpoint from a host snapshot of the training state, atomically:
// every file goes into a temporary directory .step-<N>.tmp-<pid>, is fsynced, the
// COMMITTED marker is written last, the directory is renamed to step-<N> and the parent
// directory fsynced. A crash or an error at any point leaves no committed checkpoint
// for step N and the previous ones untouched.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::checkpoint {

// The training state at a step boundary, copied off the model (host memory).
struct Snapshot {
  int64_t step = 0;             // optimizer steps completed
  int64_t optimizer_steps = 0;  // AdamW's counter
  int64_t seed = 0;
  std::string config_toml;
  // The world that took it, recorded in the manifest for the record (`dseek ckpt
  // inspect`): the buffers always hold the whole, unsharded state, which loads into any
  // world size and ZeRO stage. A pipeline or tensor-parallel job also records its layout
  // (world_size = data x pipeline x tensor); 0 means "the world size" for data_parallel.
  uint32_t world_size = 1, zero_stage = 0;
  uint32_t data_parallel = 0, pipeline_parallel = 1, tensor_parallel = 1;
  std::vector<model::ParamTensor> tensors;  // the layout of the flat buffers
  std::vector<float> params, adam_m, adam_v;
  PrecisionState precision;  // loss scale and fp8 scaling state at the step boundary
};

struct WriteOptions {
  std::filesystem::path root;  // checkpoints go to root/step-<N>/
  int64_t keep_last = 3;
  // Fault injection (fail_checkpoint_write): stop after writing half of params.bin, as
  // a full disk would, and fail.
  bool fail_midway = false;
};

struct WriteResult {
  std::filesystem::path path;
  uint64_t bytes = 0;
  double write_ms = 0.0;
  // CPU time the writing thread used (hashing, copying into the page cache): what an
  // asynchronous write can at most take from training, unlike write_ms, which is mostly
  // waiting for the disk.
  double cpu_ms = 0.0;
};

// Throws CheckpointError naming the file on failure (the temporary directory is removed);
// when the file system is full the message says how much is free and how much is needed.
WriteResult write_checkpoint(const Snapshot& snapshot, const WriteOptions& options);

}  // namespace dseek::checkpoint
