// train.offload in every layout, through `dseek launch` as a user runs it: AdamW run by
// the trainer on its own backend ("none", what "auto" picks on a device) and by the
// node's gradient_shard actors ("optimizer", the CPU's default) give one params_sha256
// -- AdamW is element-wise, so who runs it and in how many pieces does not change its
// bits -- in data parallelism under ZeRO 0, 1 and 2, a pipeline and a tensor-parallel
// job; run_started names who updated. (What a step moves between host and device either
// way: tests/unit/test_offload_overlap.cpp; on the scrambled device through dseek-node:
// test_device_training.cpp.)
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

// Node 0's final params_sha256 and run_started's "optimizer" of a 2-node job of 8 steps.
std::pair<std::string, std::string> train(const std::string& name, std::vector<std::string> job) {
  ScratchDir run(name);
  const auto result = run_process(tiny_launch(run.path(), 2, 8, job), 300s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const auto done = node_events(run.path(), 0, "train_done");
  const auto started = node_events(run.path(), 0, "run_started");
  REQUIRE(done.size() == 1);
  REQUIRE(started.size() == 1);
  require_no_node_left(run.path(), 2);
  return {string_field(done[0], "params_sha256"), string_field(started[0], "optimizer")};
}

}  // namespace

TEST_CASE("train.offload: AdamW on the trainer's backend and in the gradient_shard actors "
          "give the same parameters in every layout",
          "[offload][integration]") {
  const std::vector<std::vector<std::string>> layouts = {
      {"--set", "parallel.zero=0"},
      {"--set", "parallel.zero=1"},
      {"--set", "parallel.zero=2"},
      {"--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=4"},
      {"--set", "parallel.tensor=2"}};
  for (const auto& layout : layouts) {
    INFO("layout " << layout[1]);
    auto with = [&](const char* offload) {
      std::vector<std::string> job = layout;
      job.insert(job.end(), {"--set", std::string("train.offload=\"") + offload + "\"",
                             "--set", "train.threads=1"});
      return job;
    };
    const auto [shards_sha, shards] = train("offload-shards", with("optimizer"));
    const auto [local_sha, local] = train("offload-none", with("none"));
    CHECK(shards == "1 gradient_shard actors");
    CHECK(local == "AdamW on cpu");
    CHECK(local_sha == shards_sha);
  }
}
