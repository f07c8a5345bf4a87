// Pipeline, tensor-parallel and 3D jobs on nodes that run several ranks
// (cluster.gpus_per_node = G, issue 7): `dseek launch` jobs of local dseek-node processes
// on 127.0.0.1 whose nodes each run G worker groups, each one rank of the data x
// pipeline x tensor world (its own pipeline_stage, gradient_shards and device), on
// train.device = "cpu" (G ranks sharing the host's cores, one compute thread each).
//
// What it checks:
//   - 2 nodes x 2 ranks train bit for bit what 4 nodes x 1 rank train, for P = 2 x T = 2
//     and for P = 2 x D = 2: node k holds world ranks 2k, 2k+1 and the world rank keeps
//     its coordinates (runtime/train/layout/parallel_groups.hpp), so every rank computes the
//     same sums in the same order (the same losses at every step, the same
//     params_sha256); the launcher prints which node holds which rank, stage and tensor
//     rank; with T = 2 = G each tensor group is inside one node; P = 2 x T = 2 also on
//     the scrambled test device;
//   - a T = 2 group on one node of 2 ranks trains bit for bit what 2 nodes x 1 rank train;
//   - a node of a P = 2 x D = 2 job killed for good takes 2 ranks with it: the survivor's
//     2 ranks re-plan D = 1 x P = 2 and resume from the newest checkpoint
//     (tests/support/lost_node_launch.hpp, its 1e-5 bound on val_loss); P = 2 x T = 2
//     goes on as the tensor group alone; 2 x 3 ranks of P = 3 x T = 2 go on as T = 2 on
//     node 0, whose third rank stands by and ends when its node's trainers finished;
//   - crash_actor of "pipeline_stage@1" restarts local rank 1's worker group only, and
//     every rank resumes the same layout from the newest checkpoint: the fault-free
//     run's params_sha256.
// Every wait is bounded and no node process outlives its test. A node's events.jsonl
// holds its actors' events and its local rank 0's run; local rank r > 0 writes
// RUN_DIR/local-<r>/node-<id>/events.jsonl.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "support/lost_node_launch.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Micro-batches of 2, one compute thread per rank, one evaluation at the end.
const std::vector<std::string> kShared = {"--set", "train.micro_batch_size=2", "--set",
                                          "train.threads=1", "--set", "train.eval_every=0"};
const std::vector<std::string> kPipelineTensor = {
    "--set", "parallel.pipeline=2", "--set", "parallel.tensor=2", "--set",
    "parallel.schedule=\"1f1b\""};
const std::vector<std::string> kPipelineData = {
    "--set", "parallel.pipeline=2", "--set", "parallel.data=2", "--set",
    "parallel.schedule=\"1f1b\""};
constexpr int kSteps = 8;

std::vector<std::string> ranks_per_node(int g) {
  return {"--set", "cluster.gpus_per_node=" + std::to_string(g)};
}

// The run dir that holds the events of a node's local rank `local_rank`.
fs::path rank_dir(const fs::path& run, int local_rank) {
  return local_rank == 0 ? run : run / ("local-" + std::to_string(local_rank));
}

std::vector<double> step_losses(const fs::path& run, int node, int local_rank) {
  std::vector<double> values;
  for (const auto& step : node_events(rank_dir(run, local_rank), node, "step"))
    values.push_back(number_field(step, "loss"));
  return values;
}

struct RankResult {
  std::vector<double> losses;
  std::string params_sha256;
  double val_loss = 0.0;
};

// Every rank of a finished `dseek launch` run (`nodes` x `g`), by world rank (node k's
// local rank i is world rank k * g + i); REQUIREs each one's train_done at `steps`, and
// CHECKs one step event per step unless `steps_run_again` (a recovery ran some twice).
std::vector<RankResult> ranks_of(const fs::path& run, int nodes, int g, int steps,
                                 bool steps_run_again = false) {
  std::vector<RankResult> ranks;
  for (int node = 0; node < nodes; ++node)
    for (int local_rank = 0; local_rank < g; ++local_rank) {
      INFO("node " << node << ", local rank " << local_rank);
      const auto done = node_events(rank_dir(run, local_rank), node, "train_done");
      REQUIRE(done.size() == 1);
      CHECK(number_field(done[0], "step") == steps);
      ranks.push_back({step_losses(run, node, local_rank), string_field(done[0], "params_sha256"),
                       number_field(done[0], "val_loss")});
      if (!steps_run_again) CHECK(ranks.back().losses.size() == static_cast<size_t>(steps));
    }
  return ranks;
}

ProcessResult launch(const fs::path& run, int nodes, int g, int steps,
                     const std::vector<std::string>& job) {
  auto result = run_process(tiny_launch(run, nodes, steps, kShared + ranks_per_node(g) + job), 120s,
                            launch_env());
  INFO(result.output);
  CHECK_FALSE(result.timed_out);
  REQUIRE(result.exit_code == 0);
  return result;
}

// Each of the `nodes` x `g` ranks logged the coordinates of its world rank: replica,
// stage, tensor rank of layout/parallel_groups.hpp (tensor fastest, then stage, then replica).
void check_coordinates(const fs::path& run, int nodes, int g, int pipeline, int tensor) {
  for (int node = 0; node < nodes; ++node)
    for (int local_rank = 0; local_rank < g; ++local_rank) {
      INFO("node " << node << ", local rank " << local_rank);
      const int rank = node * g + local_rank;
      const auto layout = node_events(rank_dir(run, local_rank), node, "parallel_layout");
      REQUIRE(layout.size() == 1);
      CHECK(number_field(layout[0], "rank") == rank);
      CHECK(number_field(layout[0], "replica") == rank / (pipeline * tensor));
      CHECK(number_field(layout[0], "stage") == (rank / tensor) % pipeline);
      CHECK(number_field(layout[0], "tensor_rank") == rank % tensor);
    }
}

// `job` (a `pipeline` x `tensor` layout) on `nodes` x `g` ranks against
// `nodes * g / g_reference` nodes x `g_reference`: the same world, the same bits on every
// rank, each rank with its world rank's coordinates. Returns the launcher's output of
// the first.
std::string check_same_bits(const std::string& name, const std::vector<std::string>& job,
                            int nodes, int g, int g_reference, int pipeline, int tensor) {
  const int reference_nodes = nodes * g / g_reference;
  ScratchDir grouped(name), reference(name + "-reference");
  const auto ran = launch(grouped.path(), nodes, g, kSteps, job);
  launch(reference.path(), reference_nodes, g_reference, kSteps, job);
  const auto mine = ranks_of(grouped.path(), nodes, g, kSteps);
  const auto theirs = ranks_of(reference.path(), reference_nodes, g_reference, kSteps);
  check_coordinates(grouped.path(), nodes, g, pipeline, tensor);
  REQUIRE(mine.size() == theirs.size());
  for (size_t rank = 0; rank < mine.size(); ++rank) {
    INFO("world rank " << rank);
    CHECK(mine[rank].losses == theirs[rank].losses);
    CHECK(mine[rank].params_sha256 == theirs[rank].params_sha256);
    CHECK(mine[rank].params_sha256 == mine[0].params_sha256);
    CHECK(mine[rank].val_loss == theirs[rank].val_loss);
  }
  require_no_node_left(grouped.path(), nodes);
  require_no_node_left(reference.path(), reference_nodes);
  return ran.output;
}

}  // namespace

TEST_CASE("pipeline x tensor: 2 nodes x 2 ranks train bit for bit what 4 nodes x 1 rank train",
          "[pp][tp][multigpu][launch]") {
  const std::string output = check_same_bits("pxt-multirank", kPipelineTensor, 2, 2, 1, 2, 2);
  // The placement, printed once by the world's rank 0: each tensor group is one node.
  // (The launcher prefixes every line with the node that printed it.)
  CHECK_THAT(output, Contains("data 1 x pipeline 2 x tensor 2 on 4 ranks of 2 node(s)\n"
                              "[node 0]   node 0: rank 0 (replica 0, stage 0, tensor rank 0), "
                              "rank 1 (replica 0, stage 0, tensor rank 1)\n"
                              "[node 0]   node 1: rank 2 (replica 0, stage 1, tensor rank 0), "
                              "rank 3 (replica 0, stage 1, tensor rank 1)"));
  CHECK(output.find("a tensor group spans nodes") == std::string::npos);
}

// The same on the scrambled test device (runtime/backend/scrambled_backend.hpp): each
// group's backend is its own local device's, and a stage or tensor rank that read
// backend memory directly would not give the CPU's bits.
TEST_CASE("pipeline x tensor: 2 nodes x 2 ranks train bit for bit what 4 nodes x 1 rank train "
          "on the scrambled device",
          "[pp][tp][multigpu][launch][device]") {
  check_same_bits("pxt-multirank-device",
                  kPipelineTensor + std::vector<std::string>{
                                        "--set", "train.device=\"scrambled-cpu-for-tests\""},
                  2, 2, 1, 2, 2);
}

TEST_CASE("pipeline x data: 2 nodes x 2 ranks train bit for bit what 4 nodes x 1 rank train",
          "[pp][dp][multigpu][launch]") {
  const std::string output = check_same_bits("pxd-multirank", kPipelineData, 2, 2, 1, 2, 1);
  CHECK_THAT(output, Contains("[node 0]   node 1: rank 2 (replica 1, stage 0, tensor rank 0), "
                              "rank 3 (replica 1, stage 1, tensor rank 0)"));
}

TEST_CASE("tensor: a 2-rank group on one node of 2 ranks trains bit for bit what 2 nodes train",
          "[tp][multigpu][launch]") {
  check_same_bits("tp-multirank", {"--set", "parallel.tensor=2"}, 1, 2, 1, 1, 2);
}

// Node 1 of 2 x 2 ranks (replica 1: ranks 2 and 3) killed at step 10 for good: node 0's
// ranks 0 and 1 are one whole pipeline, which resumes from its memory at step 10.
TEST_CASE("pipeline x data: a node of 2 ranks lost for good leaves one replica on the other node",
          "[pp][dp][multigpu][launch][faults]") {
  LostNodeJob lost;
  lost.name = "pxd-multirank-kill";
  lost.job = kShared + ranks_per_node(2) + kPipelineData;
  lost.nodes = 2;
  lost.data = 1;
  lost.pipeline = 2;
  lost.from_memory = true;
  lost.also_check = [](const fs::path& run) {
    // Local rank 1 (stage 1 of the surviving replica) re-planned and resumed with rank 0.
    const auto layouts = node_events(rank_dir(run, 1), 0, "epoch_layout");
    REQUIRE(layouts.size() == 2);
    CHECK(number_field(layouts[1], "rank") == 1);
    CHECK(number_field(layouts[1], "ranks") == 2);
    CHECK(string_field(layouts[1], "role") == "train");
    const auto recovered = node_events(rank_dir(run, 1), 0, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(number_field(recovered[0], "from_step") == 10);
    CHECK(string_field(recovered[0], "source") == "memory");
    const auto done = node_events(rank_dir(run, 1), 0, "train_done");
    REQUIRE(done.size() == 1);
    CHECK(string_field(done[0], "params_sha256") ==
          string_field(node_events(run, 0, "train_done").at(0), "params_sha256"));
    for (int local_rank : {0, 1})
      CHECK(node_events(rank_dir(run, local_rank), 1, "train_done").empty());
  };
  check_lost_node_recovers(lost);
}

// P = 2 x T = 2 on 2 nodes x 2 ranks loses node 1 (stage 1): no whole pipeline is left,
// so node 0's 2 ranks (a whole tensor group) go on as the tensor group alone.
TEST_CASE("pipeline x tensor: a node of 2 ranks lost for good leaves the tensor group on the "
          "other node", "[pp][tp][multigpu][launch][faults]") {
  LostNodeJob lost;
  lost.name = "pxt-multirank-kill";
  lost.job = kShared + ranks_per_node(2) + kPipelineTensor;
  lost.nodes = 2;
  lost.tensor = 2;
  lost.also_check = [](const fs::path& run) {
    const auto recovered = node_events(rank_dir(run, 1), 0, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(number_field(recovered[0], "tensor") == 2);
    CHECK(number_field(recovered[0], "pipeline") == 1);
  };
  check_lost_node_recovers(lost);
}

// 2 nodes x 3 ranks of P = 3 x T = 2 lose node 1: 3 ranks are left, which hold no
// pipeline of 2-rank groups, so the tensor group alone trains on node 0's local ranks 0
// and 1 and its local rank 2 stands by. Every trainer is on node 0, which leaves only
// when all its groups are done: the standby group ends when its node's trainers finished
// the job (not by a member's leave, which never comes).
TEST_CASE("pipeline x tensor: a standby rank on the node that trains alone ends with the job",
          "[pp][tp][multigpu][launch][faults]") {
  LostNodeJob lost;
  lost.name = "pxt-multirank-standby";
  lost.job = kShared + ranks_per_node(3) +
             std::vector<std::string>{"--set", "parallel.pipeline=3", "--set",
                                      "parallel.tensor=2", "--set", "model.layers=3"};
  lost.nodes = 2;
  lost.tensor = 2;
  lost.also_check = [](const fs::path& run) {
    const auto layouts = node_events(rank_dir(run, 2), 0, "epoch_layout");
    REQUIRE(layouts.size() == 2);
    CHECK(string_field(layouts[1], "role") == "standby");
    CHECK(number_field(layouts[1], "rank") == 2);
    const auto ended = node_events(rank_dir(run, 2), 0, "standby_ended");
    REQUIRE(ended.size() == 1);
    CHECK(string_field(ended[0], "reason") == "a worker group of this node finished the job");
    CHECK(node_events(rank_dir(run, 2), 0, "train_done").empty());
  };
  check_lost_node_recovers(lost);
}

// A crash in node 1's pipeline_stage of local rank 1 (stage 1, tensor rank 1) at step 6:
// worker_group_1 restarts as a whole, its new worker tells the coordinator, every rank
// (node 1's local rank 0 too) aborts and resumes the same layout from the step-4
// checkpoint: the fault-free run's bits.
TEST_CASE("pipeline x tensor: a crashed pipeline_stage@1 restarts its worker group and the job "
          "recovers", "[pp][tp][multigpu][launch][faults]") {
  constexpr int kCrashSteps = 12;
  const std::vector<std::string> job =
      kPipelineTensor + std::vector<std::string>{"--set", "checkpoint.every_steps=4", "--set",
                                                 "checkpoint.async=false"};
  ScratchDir reference_run("pxt-multirank-crash-reference"), run("pxt-multirank-crash");
  launch(reference_run.path(), 2, 2, kCrashSteps, job);
  const auto reference = ranks_of(reference_run.path(), 2, 2, kCrashSteps);
  const auto result = launch(
      run.path(), 2, 2, kCrashSteps,
      job + faults(R"({kind = "crash_actor", actor = "pipeline_stage@1", node = 1, step = 6})"));
  INFO(result.output);
  CHECK_FALSE(fault_of(run.path(), 1, "crash_actor").empty());
  std::vector<std::string> restarts;
  for (const auto& line : node_events(run.path(), 1, "actor_restarted"))
    restarts.push_back(string_field(line, "supervisor") + "/" + string_field(line, "actor"));
  CHECK(std::count(restarts.begin(), restarts.end(), "worker_group_1/pipeline_stage") == 1);
  CHECK(std::count(restarts.begin(), restarts.end(), "worker_group_1/worker") == 1);
  CHECK(std::count_if(restarts.begin(), restarts.end(), [](const std::string& r) {
          return r.rfind("worker_group_0/", 0) == 0;
        }) == 0);
  CHECK(result.output.find("restarting") == std::string::npos);
  for (int node = 0; node < 2; ++node)
    for (int local_rank = 0; local_rank < 2; ++local_rank) {
      INFO("node " << node << ", local rank " << local_rank);
      const auto recovered = node_events(rank_dir(run.path(), local_rank), node, "recovered");
      REQUIRE(recovered.size() == 1);
      // The restarted group kept its copies: every rank resumes from memory at step 6.
      CHECK(number_field(recovered[0], "from_step") == 6);
      CHECK(string_field(recovered[0], "source") == "memory");
    }
  // Steps 7 to 12, run again from memory on the same layout: the fault-free run's bits,
  // to the last one. (Step 7 may also have been logged before the crash reached the
  // stage: the crash message is handled between steps, so the log's last six are the
  // ones run again.)
  constexpr int kRunAgain = kCrashSteps - 6;
  const auto recovered = ranks_of(run.path(), 2, 2, kCrashSteps, /*steps_run_again=*/true);
  for (size_t rank = 0; rank < recovered.size(); ++rank) {
    INFO("world rank " << rank);
    const auto& losses = recovered[rank].losses;
    REQUIRE(losses.size() >= static_cast<size_t>(kCrashSteps));
    CHECK(std::vector<double>(losses.end() - kRunAgain, losses.end()) ==
          std::vector<double>(reference[rank].losses.end() - kRunAgain, reference[rank].losses.end()));
    CHECK(recovered[rank].params_sha256 == reference[rank].params_sha256);
  }
  require_no_node_left(run.path(), 2);
}
