// Pipeline parallelism through the node's actor tree: `dseek launch --nodes 2` with
// parallel.pipeline = 2 runs one stage per dseek-node (the worker runs the stage on its
// thread over the epoch's data plane) and ends with the same parameters on both; and a
// pipeline that loses a node fails the job at once, naming what is missing, instead of
// hanging or restarting the run from step 0; and `dseek launch --nodes 4` with
// parallel.data = 2 runs two replicas of a 2-stage pipeline that train what one node
// trains (tests/support/replica_parity_launch.hpp); and 2 stages of 2-rank tensor groups
// on 4 nodes train what one node trains, and fail at once when one of them is lost.
#include <catch2/catch.hpp>

#include <chrono>

#include "support/lost_node_launch.hpp"
#include "support/node_runs.hpp"
#include "support/replica_parity_launch.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {
const std::vector<std::string> kPipeline = {
    "--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=4", "--set",
    "train.threads=1", "--set", "train.eval_every=0", "--set", "parallel.schedule=\"gpipe\""};
}  // namespace

TEST_CASE("pipeline: dseek launch runs one stage per node", "[pp][launch]") {
  ScratchDir run("pp-launch");
  const auto result = run_process(tiny_launch(run.path(), 2, 12, kPipeline), 120s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Contains("dseek pipeline: gpipe, 2 stages x 1 chunks, 3 micro-batches of 4"));
  const auto done0 = node_events(run.path(), 0, "train_done");
  const auto done1 = node_events(run.path(), 1, "train_done");
  REQUIRE(done0.size() == 1);
  REQUIRE(done1.size() == 1);
  CHECK(string_field(done0[0], "params_sha256") == string_field(done1[0], "params_sha256"));
  CHECK(number_field(done0[0], "step") == 12);
  const auto plan = node_events(run.path(), 1, "pipeline_plan");
  REQUIRE(plan.size() == 1);
  CHECK(string_field(plan[0], "ranges") == "[0,1) [1,2)");
  CHECK(std::filesystem::exists(run.path() / "trace.json"));
  const auto steps = node_events(run.path(), 1, "step");
  REQUIRE(steps.size() == 12);
  CHECK(number_field(steps.back(), "stage") == 1);
  CHECK(number_field(steps.back(), "bubble") >= 0.0);
}

TEST_CASE("pipeline: a lost node fails the job at once", "[pp][launch]") {
  check_lost_node_fails_at_once("pp-launch-kill", kPipeline, "pipeline-parallel");
}

// crash_actor of node 1's pipeline_stage (the actor that owns its stage's trainer) at
// step 3: the worker group restarts as one (pipeline_stage, gradient_shard, worker), the
// restarted worker tells the coordinator as after a crashed gradient_shard (node 0 then
// gets node_lost "worker restarted" and its data plane is aborted), and since a pipeline
// cannot take a stage back yet, the job fails at once: node 1 naming its stage, node 0
// with the missing recovery, as after a lost node. 400 steps: it must not run to its end.
TEST_CASE("pipeline: a crashed pipeline_stage restarts its worker group and fails the job naming the stage",
          "[pp][launch][faults]") {
  ScratchDir run("pp-launch-stage-crash");
  const auto start = std::chrono::steady_clock::now();
  const auto result = run_process(
      tiny_launch(run.path(), 2, 400,
                  kPipeline + faults(R"({kind = "crash_actor", actor = "pipeline_stage", node = 1, step = 3})")),
      120s, launch_env());
  INFO(result.output);
  CHECK_FALSE(result.timed_out);
  CHECK(result.exit_code != 0);
  CHECK(std::chrono::steady_clock::now() - start < 60s);
  CHECK_FALSE(fault_of(run.path(), 1, "crash_actor").empty());
  // The whole group came back, under worker_group, with the stage named in the reason.
  std::vector<std::string> restarted;
  for (const auto& line : node_events(run.path(), 1, "actor_restarted")) {
    CHECK(string_field(line, "supervisor") == "worker_group");
    restarted.push_back(string_field(line, "actor"));
    if (string_field(line, "actor") == "pipeline_stage")  // (the reason has quotes inside)
      CHECK_THAT(line, Contains("crash_actor pipeline_stage (stage 1)"));
  }
  CHECK_THAT(restarted, Catch::Matchers::VectorContains(std::string("pipeline_stage")));
  CHECK_THAT(restarted, Catch::Matchers::VectorContains(std::string("worker")));
  // Node 1 fails naming its stage; node 0 was told and fails as after a lost node.
  const auto own = node_events(run.path(), 1, "training_interrupted");
  REQUIRE_FALSE(own.empty());
  CHECK_THAT(own.back(), Contains("pipeline stage 1 (node 1) was restarted"));
  CHECK_THAT(own.back(), Contains("recovery of pipeline-parallel jobs is not written yet"));
  bool told = false;
  for (const auto& lost : node_events(run.path(), 0, "node_lost"))
    told = told || string_field(lost, "reason").find("worker restarted") == 0;
  CHECK(told);
  const auto peer = node_events(run.path(), 0, "training_interrupted");
  REQUIRE(peer.size() == 1);
  CHECK_THAT(peer[0], Contains("recovery of pipeline-parallel jobs is not written yet"));
  CHECK(node_events(run.path(), 0, "train_done").empty());
  CHECK(node_events(run.path(), 1, "train_done").empty());
  require_no_node_left(run.path(), 2);
}

TEST_CASE("pipeline: dseek config --check refuses a schedule that cannot run", "[pp][launch]") {
  const auto result = run_process(
      {bin("dseek"), "config", "--check", (source_dir() / "config/single.toml").string(), "--set",
       "cluster.nodes=2", "--set", "parallel.pipeline=2", "--set", "parallel.schedule=interleaved",
       "--set", "parallel.virtual_stages=2", "--set", "parallel.micro_batches=3", "--set",
       "train.batch_size=12"},
      30s);
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Contains("parallel.micro_batches (3) to be a multiple of parallel.pipeline (2)"));
}

// Two replicas of a 2-stage 1F1B pipeline, each on its half of every batch (3
// micro-batches of 2): 4 processes on 2 cores, so one schedule and 8 steps. Tolerance
// 1e-5 relative on every step's loss and on val_loss, as for the pipeline alone
// (test_pipeline.cpp): the replicas' halves of the gradient are added after
// accumulation, and the tied wte's gradient per stage, where the single node adds every
// micro-batch into one buffer: float32 rounding only (measured: 3.1e-9 on the worst
// step, 4e-10 on val_loss). Leaving out the replicas' gradient sum moves step 2's loss
// by 8.4e-4 relative (measured), 84 times the bound.
TEST_CASE("pipeline: dseek launch runs 2 replicas of a 2-stage pipeline", "[pp][launch][dp]") {
  ReplicaParityJob job;
  job.name = "pp-dp-launch";
  job.shared = {"--set", "train.micro_batch_size=2", "--set", "train.threads=1", "--set",
                "train.eval_every=0"};
  job.group = {"--set", "parallel.pipeline=2", "--set", "parallel.data=2", "--set",
               "parallel.schedule=\"1f1b\""};
  job.layout_line = "parallel layout: data 2 x pipeline 2 x tensor 1 = 4 ranks";
  job.pipeline = 2;
  check_replicas_match_single_node(job);
}

TEST_CASE("pipeline: a lost node of a replicated pipeline fails the job at once", "[pp][launch][dp]") {
  check_lost_node_fails_at_once("pp-dp-launch-kill",
                                {"--set", "parallel.pipeline=2", "--set", "parallel.data=2",
                                 "--set", "train.micro_batch_size=2", "--set", "train.threads=1",
                                 "--set", "train.eval_every=0"},
                                "pipeline-parallel", 4);
}

// Pipeline x tensor through the node's actor tree: `dseek launch --nodes 4` with
// parallel.pipeline = 2 and parallel.tensor = 2, each stage a 2-rank tensor-parallel
// group (node k is world rank k: stage k / 2, tensor rank k % 2), 1F1B with 3
// micro-batches of 2, against one node. Tolerance 1e-5 relative on every step's loss
// and on val_loss: the tensor split's float32 rounding (partial matmuls added by the
// all-reduce) on top of the pipeline's (test_pipeline_tensor.cpp has the per-schedule
// parity with gradients and parameters).
TEST_CASE("pipeline: dseek launch runs a 2-stage pipeline of 2-rank tensor groups",
          "[pp][tp][launch]") {
  ReplicaParityJob job;
  job.name = "pxt-launch";
  job.shared = {"--set", "train.micro_batch_size=2", "--set", "train.threads=1", "--set",
                "train.eval_every=0"};
  job.group = {"--set", "parallel.pipeline=2", "--set", "parallel.tensor=2", "--set",
               "parallel.schedule=\"1f1b\""};
  job.layout_line = "parallel layout: data 1 x pipeline 2 x tensor 2 = 4 ranks";
  job.pipeline = 2;
  job.tensor = 2;
  check_replicas_match_single_node(job);
}

TEST_CASE("pipeline: a lost node of a pipeline of tensor groups fails the job at once",
          "[pp][tp][launch]") {
  check_lost_node_fails_at_once("pxt-launch-kill",
                                {"--set", "parallel.pipeline=2", "--set", "parallel.tensor=2",
                                 "--set", "train.micro_batch_size=2", "--set", "train.threads=1",
                                 "--set", "train.eval_every=0"},
                                "pipeline-parallel", 4);
}
