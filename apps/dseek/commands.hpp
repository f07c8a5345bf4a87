// The subcommands of the `dseek` tool, one Command each, in its own cmd_*.cpp file.
// main.cpp dispatches to them through cli::run_command (apps/cli/usage.hpp), so every
// command follows the same conventions: --help/-h prints `usage` and exits 0, a mistake
// (the body throws cli::UsageError) prints it on stderr and exits 2. A body returns the
// process exit code (runtime/util/exit_codes.hpp).
#pragma once

#include <string>
#include <vector>

#include "cli/usage.hpp"

namespace dseek::tool {

using cli::Args;

struct Command {
  const char* name;
  const char* summary;  // its lines in `dseek --help`
  const char* usage;    // what `dseek NAME --help` prints
  int (*run)(const Args& args);
};

const Command& launch_command();   // launch --nodes N CONFIG [--set k=v ...] [--resume ...]
const Command& config_command();   // config --describe | --check FILE [--set k=v ...]
const Command& data_command();     // data prepare | tokenize | verify | info
const Command& ckpt_command();     // ckpt ls | inspect | verify | export
const Command& bench_command();    // bench train | allreduce
const Command& devices_command();  // the CUDA devices this build can use
const Command& report_command();   // report RUN_DIR [--output FILE.html]
const Command& trace_command();    // trace merge RUN_DIR [--output FILE]
const Command& generate_command(); // generate --checkpoint PATH|latest --prompt TEXT ...

// bench allreduce (cmd_bench_allreduce.cpp), reached through `dseek bench` with the
// arguments after "allreduce", and its usage (part of bench's).
int cmd_bench_allreduce(const Args& args);
extern const char* const kBenchAllreduceUsage;
// bench gemm [--threads N] [--size S] [--reps R]: the CPU backend's GEMM peak (cmd_bench_gemm.cpp)
int cmd_bench_gemm(const Args& args);

}  // namespace dseek::tool
