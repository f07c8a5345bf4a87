// `dseek bench gemm`: the CPU backend's GEMM peak, measured: one S x S x S linear layer
// (matmul_forward in fp32, mixed_matmul_forward in bf16) on the backend's threads, the
// path the model's layers take, best of R repetitions. Prints one JSON line; the training
// benches divide the model's matmul rate (`dseek bench train`'s matmul_gflops) by it.
//
//   dseek bench gemm [--threads N] [--size S] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "dseek/commands.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::tool {

int cmd_bench_gemm(const Args& args) {
  int threads = 1, size = 2048, reps = 5;
  const std::vector<std::string> options = {"--threads", "--size", "--reps"};
  for (size_t i = 0; i < args.size(); i += 2) {
    if (std::find(options.begin(), options.end(), args[i]) == options.end())
      cli::unknown("option", args[i], options);
    if (i + 1 >= args.size()) throw cli::UsageError(args[i] + " needs a value");
    int value = 0;
    try {
      size_t used = 0;
      value = std::stoi(args[i + 1], &used);
      if (used != args[i + 1].size()) throw std::invalid_argument(args[i + 1]);
    } catch (const std::exception&) {
      throw cli::UsageError("bad value '" + args[i + 1] + "' for " + args[i]);
    }
    (args[i] == "--threads" ? threads : args[i] == "--size" ? size : reps) = value;
  }
  if (threads < 1 || size < 1 || reps < 1)
    throw cli::UsageError("--threads, --size and --reps must be >= 1");
  auto be = backend::make_cpu_backend(threads);
  const size_t n = static_cast<size_t>(size) * size;
  std::vector<float> a(n), w(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 13) * 0.01f;
    w[i] = static_cast<float>(i % 7) * 0.01f;
  }
  const double flops = 2.0 * size * double(size) * size;
  auto best_gflops = [&](backend::MatmulFormat format) {
    backend::MatmulPrecision precision;
    precision.format = format;
    double best = 0.0;
    for (int r = 0; r <= reps; ++r) {  // the first is the warm-up
      const auto t0 = std::chrono::steady_clock::now();
      be->mixed_matmul_forward(out.data(), a.data(), w.data(), nullptr, size, size, size,
                               precision);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best = std::max(best, flops / s / 1e9);
    }
    return best;
  };
  const double fp32 = best_gflops(backend::MatmulFormat::fp32);
  const double bf16 = best_gflops(backend::MatmulFormat::bf16);
  util::JsonLine line;
  line.add("bench", "gemm").add("threads", threads).add("size", size).add("reps", reps)
      .add("fp32_gflops", fp32).add("bf16_gflops", bf16)
      .add("matmul_kernels", be->matmul_kernels());
  std::printf("%s\n", line.str().c_str());
  return 0;
}

}  // namespace dseek::tool
