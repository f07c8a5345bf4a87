// Checkpoints of tensor-parallel jobs through `dseek launch` (the node's checkpoint_writer
// actor writes): replica 0's group assembles the whole model state on rank 0 (column and
// row shards put back into whole tensors), which writes one ordinary checkpoint; every
// rank of a resumed job slices its shard back out of it.
//
// Same layout (T = 2 -> T = 2): the group is deterministic for a fixed layout and the
// resumed ranks hold the very bits they wrote (assembly adds -0.0, the exact identity,
// to each element), so the resumed half ends with the uninterrupted run's params_sha256
// and reports its losses bitwise.
// Across layouts (T = 2 -> one node): from the same checkpoint bits, one node continues
// as the group does up to the tensor parity tolerance (test_tensor_launch.cpp: 1e-6
// relative on every loss).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
const std::vector<std::string> kShared = {"--set", "train.micro_batch_size=4", "--set",
                                          "train.threads=1", "--set", "train.eval_every=0"};
const std::vector<std::string> kTensor = kShared + std::vector<std::string>{"--set", "parallel.tensor=2"};
constexpr int kSteps = 8;
constexpr double kRelative = 1e-6;

std::vector<double> losses(const fs::path& run, int node) {
  std::vector<double> values;
  for (const auto& step : node_events(run, node, "step")) values.push_back(number_field(step, "loss"));
  return values;
}

void launch_ok(const fs::path& run, int nodes, const std::vector<std::string>& extra) {
  const auto result = run_process(tiny_launch(run, nodes, kSteps, extra), 120s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
}

std::string sha_of(const fs::path& run, int node) {
  const auto done = node_events(run, node, "train_done");
  REQUIRE(done.size() == 1);
  return string_field(done[0], "params_sha256");
}
}  // namespace

TEST_CASE("tensor checkpoints: T=2 resumed from its own checkpoint ends bitwise as the "
          "uninterrupted run, and one node continues from it", "[tp][checkpoint]") {
  ScratchDir straight("tp-ckpt-straight"), first("tp-ckpt-first"), second("tp-ckpt-second"),
      down("tp-ckpt-2-to-1");
  launch_ok(straight.path(), 2, kTensor);
  launch_ok(first.path(), 2,
            kTensor + std::vector<std::string>{"--set", "checkpoint.every_steps=4", "--set",
                                               "train.stop_after_steps=4"});
  const fs::path checkpoint = first.path() / "checkpoints/step-00000004";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  CHECK(node_events(first.path(), 0, "checkpoint_committed").size() == 1);
  CHECK(node_events(first.path(), 1, "checkpoint_committed").empty());

  const std::vector<std::string> resume = {"--set", "checkpoint.resume=\"" + checkpoint.string() + "\""};
  launch_ok(second.path(), 2, kTensor + resume);
  const auto expected = losses(straight.path(), 0);
  REQUIRE(expected.size() == kSteps);
  const std::vector<double> rest(expected.begin() + 4, expected.end());
  for (int node = 0; node < 2; ++node) {
    INFO("rank " << node);
    const auto resumed = node_events(second.path(), node, "resumed");
    REQUIRE(resumed.size() == 1);
    CHECK(number_field(resumed[0], "written_tensor") == 2);
    CHECK(number_field(resumed[0], "tensor") == 2);
    CHECK(losses(second.path(), node) == rest);
    CHECK(sha_of(second.path(), node) == sha_of(straight.path(), 0));
  }

  launch_ok(down.path(), 1, kShared + resume);
  const auto resumed = node_events(down.path(), 0, "resumed");
  REQUIRE(resumed.size() == 1);
  CHECK(number_field(resumed[0], "written_tensor") == 2);
  const auto single = losses(down.path(), 0);
  REQUIRE(single.size() == rest.size());
  double worst = 0.0;
  for (size_t s = 0; s < rest.size(); ++s) worst = std::max(worst, std::abs(single[s] - rest[s]) / rest[s]);
  WARN("T=2 checkpoint resumed by one node: max relative loss difference " << worst);
  CHECK(worst <= kRelative);
}

// ZeRO inside the data group (D = 2 x T = 2, parallel.zero = 1): each tensor rank's two
// replicas hold halves of its moments (run_started's optimizer_params add up to the
// shard), and the checkpoint, for which both replicas gather their pieces to replica 0,
// holds the whole optimizer state: resumed on the same layout the run ends bitwise as
// the uninterrupted one (a piece left out would restart those moments from zero), and
// T = 2 without ZeRO continues from it within the bound above.
TEST_CASE("tensor checkpoints: D=2 x T=2 with ZeRO 1 shards the moments and resumes "
          "bitwise from its own checkpoint", "[tp][checkpoint][dp][zero]") {
  // Micro-batches of 2: a replica's slice of the batch of 12 is 6 sequences.
  const std::vector<std::string> shared = {"--set", "train.micro_batch_size=2", "--set",
                                           "train.threads=1", "--set", "train.eval_every=0",
                                           "--set", "parallel.tensor=2"};
  const std::vector<std::string> zero =
      shared + std::vector<std::string>{"--set", "parallel.data=2", "--set", "parallel.zero=1"};
  ScratchDir straight("tp-zero-ckpt-straight"), first("tp-zero-ckpt-first"),
      second("tp-zero-ckpt-second"), unsharded("tp-zero-ckpt-to-t2");
  launch_ok(straight.path(), 4, zero);
  for (int tensor_rank = 0; tensor_rank < 2; ++tensor_rank) {
    INFO("tensor rank " << tensor_rank);
    double pieces = 0.0, shard = 0.0;
    for (int replica = 0; replica < 2; ++replica) {
      const auto started = node_events(straight.path(), replica * 2 + tensor_rank, "run_started");
      REQUIRE(started.size() == 1);
      CHECK(number_field(started[0], "zero") == 1);
      shard = number_field(started[0], "shard_params");
      const double mine = number_field(started[0], "optimizer_params");
      CHECK(std::abs(mine - shard / 2) <= 1.0);
      pieces += mine;
    }
    CHECK(pieces == shard);
  }
  launch_ok(first.path(), 4,
            zero + std::vector<std::string>{"--set", "checkpoint.every_steps=4", "--set",
                                            "train.stop_after_steps=4"});
  const fs::path checkpoint = first.path() / "checkpoints/step-00000004";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  const std::vector<std::string> resume = {"--set", "checkpoint.resume=\"" + checkpoint.string() + "\""};
  launch_ok(second.path(), 4, zero + resume);
  const auto expected = losses(straight.path(), 0);
  REQUIRE(expected.size() == kSteps);
  const std::vector<double> rest(expected.begin() + 4, expected.end());
  for (int node = 0; node < 4; ++node) {
    INFO("node " << node);
    CHECK(losses(second.path(), node) == rest);
    CHECK(sha_of(second.path(), node) == sha_of(straight.path(), 0));
  }

  launch_ok(unsharded.path(), 2, shared + resume);
  const auto resumed = node_events(unsharded.path(), 0, "resumed");
  REQUIRE(resumed.size() == 1);
  CHECK(number_field(resumed[0], "written_data") == 2);
  const auto t2 = losses(unsharded.path(), 0);
  REQUIRE(t2.size() == rest.size());
  double worst = 0.0;
  for (size_t s = 0; s < rest.size(); ++s) worst = std::max(worst, std::abs(t2[s] - rest[s]) / rest[s]);
  WARN("D=2 x T=2 zero 1 checkpoint resumed by T=2 without ZeRO: max relative loss difference "
       << worst);
  CHECK(worst <= kRelative);
}
