// Pipeline parallelism through the node's actor tree: `dseek launch --nodes 2` with
// parallel.pipeline = 2 runs one stage per dseek-node (the worker runs the stage on its
// thread over the epoch's data plane) and ends with the same parameters on both; and a
// pipeline that loses a node goes on: the survivors re-plan (fewer replicas, or one
// stage) and resume from the newest checkpoint (tests/support/lost_node_launch.hpp), and
// a node that restarts brings the layout back; and `dseek launch --nodes 4` with
// parallel.data = 2 runs two replicas of a 2-stage pipeline that train what one node
// trains (tests/support/replica_parity_launch.hpp); and 2 stages of 2-rank tensor groups
// on 4 nodes train what one node trains, and fail at once when one of them is lost.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "pipeline/pp_job.hpp"
#include "support/lost_node_launch.hpp"
#include "support/node_runs.hpp"
#include "support/replica_parity_launch.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {
const std::vector<std::string> kReplicatedPipeline = {
    "--set", "parallel.pipeline=2", "--set", "parallel.data=2", "--set", "train.micro_batch_size=2",
    "--set", "train.threads=1", "--set", "train.eval_every=0"};
const std::vector<std::string> kPipeline = {
    "--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=4", "--set",
    "train.threads=1", "--set", "train.eval_every=0", "--set", "parallel.schedule=\"gpipe\""};

// The node loss of 2 replicas of a 2-stage pipeline on 4 nodes (the last node lost).
LostNodeJob replicated_pipeline_loss(const std::string& name) {
  LostNodeJob lost;
  lost.name = name;
  lost.job = kReplicatedPipeline;
  lost.nodes = 4;
  lost.pipeline = 2;
  return lost;
}
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

// Fewer nodes than stages: the layers go back onto one node.
TEST_CASE("pipeline: a node lost for good leaves one stage that trains the whole model",
          "[pp][launch][faults]") {
  LostNodeJob lost;
  lost.name = "pp-launch-kill";
  lost.job = kPipeline;
  check_lost_node_recovers(lost);
}

// A crash in node 1's pipeline_stage (the actor that owns the stage trainer) at step 6:
// its worker group (stage and worker) restarts, the new worker tells the coordinator,
// node 0 hears "worker restarted", and both ranks resume the same layout from their
// memory of step 6 (runtime/train/state/stage_memory.hpp; the step-4 checkpoint is not
// read): the same layout resumed from its own state computes the fault-free run's bits (test_pipeline_checkpoint, test_tensor_checkpoint), so params_sha256 must
// equal the fault-free run's. `layout_key` ("pipeline" or "tensor") is the recovered
// event's field that must still be 2. One stage trainer runs both layouts, so the same
// fault and the same recovery hold for a pipeline and for a tensor-parallel group.
namespace {
void check_crashed_stage_recovers(const std::string& name, const std::vector<std::string>& layout,
                                  const std::string& layout_key, const std::string& stage_name) {
  constexpr int kSteps = 12;
  const std::vector<std::string> job =
      layout + std::vector<std::string>{"--set", "checkpoint.every_steps=4", "--set",
                                        "checkpoint.async=false"};
  ScratchDir reference_run(name + "-reference"), run(name);
  const auto reference = run_process(tiny_launch(reference_run.path(), 2, kSteps, job), 120s,
                                     launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto reference_done = node_events(reference_run.path(), 0, "train_done");
  REQUIRE(reference_done.size() == 1);

  // The whole group came back, under worker_group, with the stage named in the reason.
  const auto restarted = pp::launch_crashing_in_worker_group(
      run.path(), 2, kSteps, job,
      R"({kind = "crash_actor", actor = "pipeline_stage", node = 1, step = 6})", 1, 120s);
  for (const auto& line : node_events(run.path(), 1, "actor_restarted"))
    if (string_field(line, "actor") == "pipeline_stage")  // (the reason has quotes inside)
      CHECK_THAT(line, Contains("crash_actor pipeline_stage (" + stage_name + ")"));
  CHECK_THAT(restarted, Catch::Matchers::VectorContains(std::string("pipeline_stage")));
  CHECK_THAT(restarted, Catch::Matchers::VectorContains(std::string("worker")));
  bool told = false;
  for (const auto& lost : node_events(run.path(), 0, "node_lost"))
    told = told || string_field(lost, "reason").find("worker restarted") == 0;
  CHECK(told);
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node);
    const auto recovered = node_events(run.path(), node, "recovered");
    REQUIRE(recovered.size() == 1);
    // The restarted worker group kept its copies (the node's, not the group's): both
    // ranks resume from memory at the step of the crash, no checkpoint read.
    CHECK(number_field(recovered[0], "from_step") == 6);
    CHECK(string_field(recovered[0], "source") == "memory");
    CHECK(number_field(recovered[0], layout_key) == 2);
    CHECK(final_params_sha256(run.path(), node, kSteps) ==
          string_field(reference_done[0], "params_sha256"));
  }
  require_no_node_left(run.path(), 2);
}
}  // namespace

TEST_CASE("pipeline: a crashed pipeline_stage restarts its worker group and the job recovers",
          "[pp][launch][faults]") {
  check_crashed_stage_recovers("pp-launch-stage-crash", kPipeline, "pipeline", "stage 1");
}

TEST_CASE("tensor: a crashed pipeline_stage (the stage trainer of a tensor rank) restarts its "
          "worker group and the job recovers", "[tp][pp][launch][faults]") {
  const std::vector<std::string> tensor = {"--set", "parallel.tensor=2", "--set",
                                           "train.micro_batch_size=4", "--set", "train.threads=1",
                                           "--set", "train.eval_every=0"};
  check_crashed_stage_recovers("tp-launch-stage-crash", tensor, "tensor", "stage 0, tensor rank 1");
}

// Every other actor a node runs can be crashed in a pipeline job too (the fault list of
// a data-parallel job): the worker takes its worker group down and the job recovers
// from the step-4 checkpoint on the same layout; the node's other actors (the data
// prefetcher, the health monitor, the metrics exporter, the membership agent, the fault
// injector) restart under their supervisor while training goes on, or, for the
// membership agent, after the coordinator saw the node leave and come back. Each run
// ends on both nodes with the fault-free run's params_sha256: the layout is the same
// before and after, and so are the bits.
TEST_CASE("pipeline: a crash of any of a node's actors leaves the job's result unchanged",
          "[pp][launch][faults]") {
  constexpr int kSteps = 10;
  const std::vector<std::string> job =
      kPipeline + std::vector<std::string>{"--set", "checkpoint.every_steps=4", "--set",
                                           "checkpoint.async=false"};
  ScratchDir reference_run("pp-launch-crash-reference");
  const auto reference = run_process(tiny_launch(reference_run.path(), 2, kSteps, job), 120s,
                                     launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto reference_done = node_events(reference_run.path(), 0, "train_done");
  REQUIRE(reference_done.size() == 1);
  for (const char* actor : {"worker", "data_prefetcher", "health_monitor", "metrics_exporter",
                            "membership", "fault_injector"}) {
    INFO(actor);
    ScratchDir run(std::string("pp-launch-crash-") + actor);
    const auto result = run_process(
        tiny_launch(run.path(), 2, kSteps,
                    job + faults(std::string("{kind = \"crash_actor\", actor = \"") + actor +
                                 "\", node = 1, step = 6}")),
        150s, launch_env());
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    CHECK_FALSE(fault_of(run.path(), 1, "crash_actor").empty());
    for (int node = 0; node < 2; ++node) {
      INFO("node " << node);
      CHECK(final_params_sha256(run.path(), node, kSteps) ==
            string_field(reference_done[0], "params_sha256"));
    }
    require_no_node_left(run.path(), 2);
  }
}

// A kill inside the data group's gradient reduction (during = "reduction": the peers
// are mid-collective in the reducer the stage trainer shares with data parallelism):
// the survivors re-plan and finish as after a kill at a step boundary.
TEST_CASE("pipeline: a node of a replicated pipeline killed during the gradient reduction costs "
          "a replica and the job finishes", "[pp][launch][dp][faults]") {
  LostNodeJob lost = replicated_pipeline_loss("pp-dp-launch-kill-reduction");
  lost.during_reduction = true;
  lost.from_memory = true;
  lost.also_check = [](const std::filesystem::path& run) {
    const std::string fault = fault_of(run, 3, "kill");
    REQUIRE_FALSE(fault.empty());
    CHECK_THAT(string_field(fault, "trigger"), Contains("during the reduction"));
  };
  check_lost_node_recovers(lost);
}

TEST_CASE("pipeline: dseek config --check refuses a schedule that cannot run", "[pp][launch]") {
  const auto result = run_process(
      {bin("dseek"), "config", "--check", (source_dir() / "config/single.toml").string(), "--set",
       "cluster.nodes=2", "--set", "parallel.pipeline=2", "--set", "parallel.schedule=interleaved",
       "--set", "parallel.virtual_stages=2", "--set", "parallel.micro_batches=3", "--set",
       "train.batch_size=12"},
      30s);
  INFO(result.output);
  CHECK(result.exit_code == 3);  // a config error
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
  job.group = {"--set", "parallel.pipeline=2", "--set", "parallel.data=2", "--set",
               "parallel.schedule=\"1f1b\""};
  job.layout_line = "parallel layout: data 2 x pipeline 2 x tensor 1 = 4 ranks";
  job.pipeline = 2;
  check_replicas_match_single_node(job);
}

// The test of issue 8: a 4-node job with P = 2 loses a node and finishes with D = 1.
TEST_CASE("pipeline: a lost node of a replicated pipeline costs a replica and the job finishes",
          "[pp][launch][dp][faults]") {
  LostNodeJob lost = replicated_pipeline_loss("pp-dp-launch-kill");
  lost.from_memory = true;  // replica 0 survives whole, at its positions
  check_lost_node_recovers(lost);
}

// ZeRO inside the data group (parallel.zero = 1): through dseek-node, the two replicas
// of each stage shard its optimizer state (said at start) and train what one node
// trains, within the bound above.
TEST_CASE("pipeline: dseek launch runs 2 replicas of a 2-stage pipeline with ZeRO 1",
          "[pp][launch][dp][zero]") {
  ReplicaParityJob job;
  job.name = "pp-dp-zero-launch";
  job.group = {"--set", "parallel.pipeline=2", "--set", "parallel.data=2", "--set",
               "parallel.schedule=\"1f1b\"", "--set", "parallel.zero=1"};
  job.layout_line = "optimizer state sharded over the data group (ZeRO 1, 2 replicas)";
  job.pipeline = 2;
  check_replicas_match_single_node(job);
}

// The same node loss with ZeRO 1: each survivor holds its own moment pieces and its
// ring neighbour's (the lost replica's), so it resumes from its memory at step 10,
// unsharded (D = 1), within the bound of lost_node_launch.hpp; its state was put together
// with the lost replica's pieces: source "peer".
TEST_CASE("pipeline: a lost node of a replicated pipeline with ZeRO 1 costs a replica and the "
          "job finishes", "[pp][launch][dp][faults][zero]") {
  LostNodeJob lost;
  lost.name = "pp-dp-zero-launch-kill";
  lost.job = kReplicatedPipeline + std::vector<std::string>{"--set", "parallel.zero=1"};
  lost.nodes = 4;
  lost.pipeline = 2;
  lost.from_memory = true;
  lost.memory_source = "peer";
  lost.also_check = [](const std::filesystem::path& run) {
    // Node 0 started sharded over 2 replicas, then trained the survivors' layout alone.
    const auto started = node_events(run, 0, "run_started");
    REQUIRE(started.size() == 2);
    CHECK(number_field(started[0], "zero") == 1);
    CHECK(number_field(started[1], "zero") == 0);
    CHECK(number_field(started[0], "optimizer_params") <
          0.6 * number_field(started[1], "optimizer_params"));
  };
  check_lost_node_recovers(lost);
}

// Not one whole pipeline is left: the 3 blocks go over the 2 survivors' stages.
TEST_CASE("pipeline: a 3-stage pipeline that loses a node re-partitions its layers over 2 stages",
          "[pp][launch][faults]") {
  LostNodeJob lost;
  lost.name = "pp3-launch-kill";
  lost.job = {"--set", "parallel.pipeline=3", "--set", "model.layers=3", "--set",
              "train.micro_batch_size=2", "--set", "train.threads=1", "--set",
              "train.eval_every=0"};
  lost.nodes = 3;
  lost.pipeline = 2;
  lost.also_check = [](const std::filesystem::path& run) {
    std::vector<std::string> splits;
    for (const auto& plan : node_events(run, 0, "pipeline_plan"))
      splits.push_back(string_field(plan, "ranges"));
    CHECK(splits == std::vector<std::string>{"[0,1) [1,2) [2,3)", "[0,2) [2,3)"});
  };
  check_lost_node_recovers(lost);
}

// A node that hangs is declared lost by its missing heartbeats: the same recovery.
TEST_CASE("pipeline: a node of a replicated pipeline that hangs costs a replica and the job "
          "finishes", "[pp][launch][dp][faults]") {
  LostNodeJob lost = replicated_pipeline_loss("pp-dp-launch-hang");
  lost.fault = "hang";
  lost.from_memory = true;
  check_lost_node_recovers(lost);
}

// The lost node is restarted by the launcher (cluster.max_restarts) while the survivors
// train without it (elastic.rejoin_seconds = 0: they re-plan at once, node 2 stands by):
// when it rejoins, the ranks finish their step, checkpoint it and leave that layout
// together (no abort: the peers are alive), every node resumes the whole one (data 2 x
// pipeline 2) at that step: nodes 0 and 1 from their memory, node 2 (whose copies are
// of the step it stood by at) and the restarted node 3 from a replica of their stage
// (source "peer"), and the job ends with the fault-free run's
// val_loss (the tolerance of lost_node_launch.hpp: two changes of layout, each another
// summation order). 200 steps, so that the one-replica layout is still training when the
// node is back (about 1 s after the kill; those steps take about 5 s).
TEST_CASE("pipeline: a restarted node rejoins and the replicated pipeline grows back",
          "[pp][launch][dp][faults]") {
  constexpr int kSteps = 200;
  const std::vector<std::string> job =
      kReplicatedPipeline + std::vector<std::string>{"--set", "checkpoint.every_steps=4",
                                                     "--set", "checkpoint.async=false"};
  ScratchDir reference_run("pp-dp-rejoin-reference"), run("pp-dp-rejoin");
  const auto reference =
      run_process(tiny_launch(reference_run.path(), 4, kSteps, job), 180s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto result = run_process(
      tiny_launch(run.path(), 4, kSteps,
                  job + std::vector<std::string>{"--set", "elastic.rejoin_seconds=0"} +
                      faults(R"({kind = "kill", node = 3, step = 10})")),
      180s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Contains("[launch] node 3 killed by signal SIGKILL; restarting (1/"));
  // Node 2 stood by while the survivors trained one replica, then trained again.
  std::vector<std::string> roles;
  for (const auto& layout : node_events(run.path(), 2, "epoch_layout"))
    roles.push_back(string_field(layout, "role") + " " +
                    std::to_string(static_cast<int>(number_field(layout, "data"))));
  CHECK(roles == std::vector<std::string>{"train 2", "standby 1", "train 2"});
  // The one-replica layout was left at a step boundary, with the checkpoint of that step.
  for (int node : {0, 1}) {
    INFO("node " << node);
    const auto left = node_events(run.path(), node, "layout_left");
    REQUIRE(left.size() == 1);
    const double step = number_field(left[0], "step");
    CHECK_FALSE(event_with(run.path(), node, "resumed", "step", step).empty());
  }
  std::string sha;
  for (int node = 0; node < 4; ++node) {
    INFO("node " << node);
    const auto recovered = node_events(run.path(), node, "recovered");
    REQUIRE_FALSE(recovered.empty());
    // The last recovery is into the whole layout again, at the step the one-replica
    // layout was left, from memory: the ranks' own, or a replica's of their stage.
    CHECK(number_field(recovered.back(), "data") == 2);
    CHECK(string_field(recovered.back(), "source") == (node < 2 ? "memory" : "peer"));
    CHECK(number_field(recovered.back(), "from_step") ==
          number_field(node_events(run.path(), 0, "layout_left").at(0), "step"));
    const auto done = node_events(run.path(), node, "train_done");
    REQUIRE(done.size() == 1);
    CHECK(number_field(done[0], "step") == kSteps);
    if (sha.empty()) sha = string_field(done[0], "params_sha256");
    CHECK(string_field(done[0], "params_sha256") == sha);
  }
  CHECK(node_events(run.path(), 0, "recovered").size() == 2);  // into data 1, then data 2
  const double expected = number_field(node_events(reference_run.path(), 0, "train_done")[0], "val_loss");
  const double got = number_field(node_events(run.path(), 0, "train_done")[0], "val_loss");
  const double relative = std::abs(got - expected) / std::abs(expected);
  WARN("rejoin: val_loss " << got << ", fault-free " << expected << ": " << relative
                           << " relative (tolerance 1e-5)");
  CHECK(relative <= 1e-5);
  require_no_node_left(run.path(), 4);
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
  job.group = {"--set", "parallel.pipeline=2", "--set", "parallel.tensor=2", "--set",
               "parallel.schedule=\"1f1b\""};
  job.layout_line = "parallel layout: data 1 x pipeline 2 x tensor 2 = 4 ranks";
  job.pipeline = 2;
  job.tensor = 2;
  check_replicas_match_single_node(job);
}

// 4 nodes P = 2 x T = 2 lose one: 3 survivors hold no whole pipeline of tensor groups
// and no 1-stage pipeline is a pipeline, so the survivors keep the tensor group alone
// (T = 2 on nodes 0 and 1, node 2 standing by) and resume from the step-8 checkpoint.
TEST_CASE("pipeline: a pipeline of tensor groups that loses a node goes on as one tensor group",
          "[pp][tp][launch][faults]") {
  LostNodeJob lost;
  lost.name = "pxt-launch-kill";
  lost.job = {"--set", "parallel.pipeline=2", "--set", "parallel.tensor=2", "--set",
              "train.micro_batch_size=2", "--set", "train.threads=1", "--set",
              "train.eval_every=0"};
  lost.nodes = 4;
  lost.tensor = 2;
  check_lost_node_recovers(lost);
}
