// `dseek`: the command-line tools around a dseek job. Dispatches to one subcommand.
#include <cstdio>
#include <exception>
#include <string>

#include "dseek/commands.hpp"

namespace {

constexpr const char* kUsage =
    "usage: dseek <command> [args]\n"
    "commands:\n"
    "  launch --nodes N CONFIG [--set k=v ...]  run N local dseek-nodes (see launch --help)\n"
    "  config --describe              print the reference of every config key\n"
    "  config --check FILE [--set k=v] validate a config, print it resolved\n"
    "  data prepare --input DIR --output DIR [--val-fraction F] [--shard-tokens N]\n"
    "                                 turn text files into token shards\n"
    "  data verify DIR                re-check every shard's checksum\n"
    "  data info DIR                  print a prepared data set's index\n"
    "  bench train [--config FILE] [--threads N] [--set k=v ...]\n"
    "                                 time training steps, print one JSON line\n"
    "  bench allreduce --ranks N --bytes B[,B2,...] [--iters K] [--dtype f32|bf16]\n"
    "                                 all-reduce bandwidth between N local processes\n"
    "  bench gemm [--threads N] [--size S] [--reps R]\n"
    "                                 the CPU backend's fp32 and bf16 GEMM peak\n"
    "  devices                        list the CUDA devices this build can use\n"
    "  ckpt ls DIR                    committed checkpoints: step, size, time\n"
    "  ckpt inspect PATH              a checkpoint's layout, tensors and shapes\n"
    "  ckpt verify PATH               check every checksum (exit 1 naming the bad one)\n"
    "  ckpt export PATH --format safetensors --output FILE\n"
    "                                 the parameters as a .safetensors file\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  dseek::tool::Args args(argv + 2, argv + argc);
  try {
    if (command == "config") return dseek::tool::cmd_config(args);
    if (command == "data") return dseek::tool::cmd_data(args);
    if (command == "bench") return dseek::tool::cmd_bench(args);
    if (command == "devices") return dseek::tool::cmd_devices(args);
    if (command == "ckpt") return dseek::tool::cmd_ckpt(args);
    if (command == "launch") return dseek::tool::cmd_launch(args);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dseek %s: %s\n", command.c_str(), error.what());
    return 1;
  }
  std::fprintf(stderr, "dseek: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 2;
}
