// The subcommands of the `dseek` tool, one function each, in its own cmd_*.cpp file.
// Each takes the arguments after its name and returns the process exit code
// (0 success, 1 failure, 2 bad usage). main.cpp dispatches to them.
#pragma once

#include <string>
#include <vector>

namespace dseek::tool {

using Args = std::vector<std::string>;

int cmd_config(const Args& args);   // config --describe | --check FILE [--set k=v ...]
int cmd_data(const Args& args);     // data prepare --input DIR --output DIR [...]
int cmd_bench(const Args& args);    // bench train [--config FILE] [--threads N] [--set k=v]
int cmd_devices(const Args& args);
int cmd_launch(const Args& args);   // launch --nodes N CONFIG [--set k=v ...]: N local nodes
int cmd_ckpt(const Args& args);     // ckpt ls DIR | inspect PATH | verify PATH | export PATH ...  // devices: the CUDA devices this build can use
// bench allreduce --ranks N --bytes B[,B2,...] [--iters K] | --memcpy-bytes B
// (reached through cmd_bench: `dseek bench allreduce ...`)
int cmd_bench_allreduce(const Args& args);
// bench gemm [--threads N] [--size S] [--reps R]: the CPU backend's GEMM peak (cmd_bench_gemm.cpp)
int cmd_bench_gemm(const Args& args);

}  // namespace dseek::tool
