// all-reduce benchmark: bus bandwidth (2(N-1)/N * bytes / time, the NCCL convention) for
// a list of sizes; rank 0 prints one line per size. --bytes a,b,c  --iters N
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

const RegisterScenario bench("bench_all_reduce", [](RankEnv& env) {
  std::vector<size_t> sizes;
  std::stringstream s(env.arg("bytes", "1048576,16777216"));
  for (std::string item; std::getline(s, item, ',');) sizes.push_back(std::stoul(item));
  const int iters = std::stoi(env.arg("iters", "20"));
  for (size_t bytes : sizes) {
    std::vector<float> buf(bytes / 4, 1.0f);
    for (int w = 0; w < 3; ++w) env.comm->all_reduce(buf.data(), buf.size(), DataType::f32, ReduceOp::sum).wait();
    std::vector<double> times;
    for (int i = 0; i < iters; ++i) {
      env.comm->barrier().wait();
      const auto t0 = std::chrono::steady_clock::now();
      env.comm->all_reduce(buf.data(), buf.size(), DataType::f32, ReduceOp::sum).wait();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    const double busbw = 2.0 * (env.size - 1) / env.size * static_cast<double>(bytes) / median / 1e9;
    if (env.rank == 0)
      std::printf("all_reduce ranks %d bytes %zu median %.1f us busbw %.2f GB/s\n", env.size, bytes, median * 1e6, busbw);
  }
});

}  // namespace
}  // namespace dseek::comm::test
