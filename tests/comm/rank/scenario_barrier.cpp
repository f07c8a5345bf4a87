// Barrier scenarios: nobody leaves a barrier before the last rank entered it. Each rank
// enters late by its rank number times 50 ms; the time spent in the barrier shows it.
#include <chrono>
#include <thread>

#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

const RegisterScenario barrier("barrier", [](RankEnv& env) {
  for (int round = 0; round < 3; ++round) {
    env.comm->barrier().wait();
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(50 * env.rank));
    env.comm->barrier().wait();
    const auto waited = std::chrono::steady_clock::now() - start;
    // The last rank entered 50*(N-1) ms after the start; everyone must have waited for it.
    require(waited >= std::chrono::milliseconds(50 * (env.size - 1) - 25),
            "left the barrier after " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()) +
                " ms, before the last rank entered");
  }
});

}  // namespace
}  // namespace dseek::comm::test
