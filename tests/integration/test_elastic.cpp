// Elastic data-parallel training end to end: `dseek launch` jobs of 1 to 3 local
// dseek-node processes on 127.0.0.1 that train one tiny GPT on real text (the global
// batch of 12 sequences split over the nodes, one compute thread each), with faults
// injected at a step: a kill with and without rejoin, a hang, a corrupted gradient, a
// kill in the middle of the gradient all-reduce; under ZeRO 1 and 2 a kill that recovers
// from the peers' memory (each node keeps its ring neighbour's optimizer shard), with and
// without rejoin, and the loss of two ring neighbours that falls back to a disk
// checkpoint; and with compressed gradients. Each test compares what a run ends with
// (params_sha256, the losses, the validation loss) to a fault-free run, and reads how the
// nodes recovered from their events.jsonl. Every wait is bounded, and no node process
// outlives its test.
//
// The fault-free reference runs are made once per test process and shared by the tests
// that run in it. Recovery times and the tolerances met are printed as warnings.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/launched_job.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr int kSteps = 40;
// The step the faults fire at: before the 0-based step 10, i.e. with 10 steps done.
constexpr int kFaultStep = 10;

// One compute thread per node (a 3-node job on 2 cores) and one evaluation, at the end.
const std::vector<std::string> kOneThread = {"--set", "train.threads=1", "--set",
                                             "train.eval_every=0"};

// Data parallelism changes only the order of floating-point sums: every world size
// trains on the same 12 sequences per step, each node takes the mean-loss gradient of its
// slice, and the all-reduce adds the slices up. The float32 sums then differ in their
// last bits (~1e-7 relative per step), and 40 AdamW steps carry that on without blowing
// it up: measured at most 2.3e-7 (2 nodes) and 8e-8 (3 nodes) relative on the step
// losses. 1e-5 leaves a margin of 40 while any real mistake (a slice dropped or counted
// twice, a stale gradient) moves the loss by 1e-3 or more.
constexpr double kSumOrderTolerance = 1e-5;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

double relative_difference(double a, double b) { return std::abs(a - b) / std::abs(b); }

using Job = LaunchedJob;

std::unique_ptr<Job> launch(const std::string& tag, int nodes,
                            const std::vector<std::string>& extra, int steps = kSteps) {
  return launch_tiny_job(tag, nodes, steps, kOneThread + extra);
}

std::string require_finished(const Job& job, const std::vector<int>& nodes, int total_nodes) {
  return require_finished(job, nodes, total_nodes, kSteps);
}

std::vector<int> all_nodes(int nodes) {
  std::vector<int> ids;
  for (int node = 0; node < nodes; ++node) ids.push_back(node);
  return ids;
}

// The fault-free run of `nodes` nodes with `extra` settings, made once per test process.
const Job& fault_free(int nodes, const std::vector<std::string>& extra = {}) {
  static std::map<std::pair<int, std::vector<std::string>>, std::unique_ptr<Job>> made;
  auto& cached = made[{nodes, extra}];
  if (!cached) {
    auto job = launch("elastic-reference", nodes, extra);
    require_finished(*job, all_nodes(nodes), nodes);
    cached = std::move(job);
  }
  return *cached;
}

// The loss of every step, by step number (a step done again after a recovery counts
// with its last value).
std::map<int, double> step_losses(const Job& job, int node) {
  std::map<int, double> losses;
  for (const auto& line : node_events(job.path(), node, "step"))
    losses[static_cast<int>(number_field(line, "step"))] = number_field(line, "loss");
  return losses;
}

// The largest relative difference of `job`'s step losses on `node` from `reference`'s
// (node 0), over the same steps (REQUIREs all kSteps on both).
double max_loss_difference(const Job& job, int node, const Job& reference) {
  const auto expected = step_losses(reference, 0);
  const auto got = step_losses(job, node);
  REQUIRE(expected.size() == static_cast<size_t>(kSteps));
  REQUIRE(got.size() == static_cast<size_t>(kSteps));
  double worst = 0.0;
  for (const auto& [step, loss] : expected)
    worst = std::max(worst, relative_difference(got.at(step), loss));
  return worst;
}

// Detection and recovery times are printed (WARN) and measured by bench/zero_recovery.sh
// and bench/hosts_recovery.sh, not asserted as figures: a bound only rules out a node
// that waited on a collective's timeout (comm.timeout_ms, 30 s) instead of the loss.
constexpr double kFarBelowCollectiveTimeoutMs = 15000;

// Node `node` recovered once, from `from_step`, out of `source`, into a world of
// `world_size`; returns its recovery_ms.
double recovered(const Job& job, int node, int from_step, const std::string& source,
                 int world_size) {
  const auto events = node_events(job.path(), node, "recovered");
  INFO("node " << node);
  REQUIRE(events.size() == 1);
  CHECK(number_field(events[0], "from_step") == from_step);
  CHECK(string_field(events[0], "source") == source);
  CHECK(number_field(events[0], "world_size") == world_size);
  if (source != "disk") {
    // A state from memory or a peer resumes at the step after it: no step is run twice
    // (a replay from step 0 would give the same parameters, but lose the time).
    double last = 0;
    for (const auto& step : node_events(job.path(), node, "step")) {
      const double number = number_field(step, "step");
      CHECK(number > last);
      last = number;
    }
  }
  return number_field(events[0], "recovery_ms");
}

// "node 0 123 ms, node 1 ..." for a warning.
std::string listing(const std::map<int, double>& ms_by_node) {
  std::string text;
  for (const auto& [node, ms] : ms_by_node)
    text += (text.empty() ? "" : ", ") + ("node " + std::to_string(node) + " " +
                                          std::to_string(static_cast<int>(ms)) + " ms");
  return text;
}

// Wall-clock milliseconds from node `faulty`'s fault `kind` to node 0's recovered event
// (its first step completed after the failure): detection, restart and rejoin, state
// agreement and one step.
double fault_to_recovery_ms(const Job& job, int faulty, const std::string& kind) {
  const auto fault = fault_of(job.path(), faulty, kind);
  const auto back = node_events(job.path(), 0, "recovered");
  REQUIRE_FALSE(fault.empty());
  REQUIRE(back.size() == 1);
  return (number_field(back[0], "ts") - number_field(fault, "ts")) * 1000.0;
}

// The data-parallel rank node `node` trained as in its first world.
int first_rank(const Job& job, int node) {
  const auto started = node_events(job.path(), node, "worker_started");
  INFO("node " << node);
  REQUIRE_FALSE(started.empty());
  return static_cast<int>(number_field(started[0], "rank"));
}

}  // namespace

TEST_CASE("data-parallel jobs on 1 to 3 nodes have the same losses step by step", "[elastic]") {
  const Job& one = fault_free(1);
  const auto losses = step_losses(one, 0);
  REQUIRE(losses.size() == static_cast<size_t>(kSteps));
  CHECK(losses.rbegin()->second < losses.begin()->second - 1.0);  // it does learn
  for (int nodes : {2, 3}) {
    const Job& job = fault_free(nodes);
    double worst = 0.0;
    for (int node = 0; node < nodes; ++node) {
      INFO(nodes << " nodes, node " << node);
      worst = std::max(worst, max_loss_difference(job, node, one));
      CHECK(params_of(job, node) == params_of(job, 0));  // one model, replicated
    }
    WARN(nodes << " nodes: step losses within " << worst << " relative of 1 node's (tolerance "
               << kSumOrderTolerance << ")");
    CHECK(worst <= kSumOrderTolerance);
  }
}

TEST_CASE("a node killed at a step rejoins and the job ends with the fault-free model",
          "[elastic][faults]") {
  const Job& reference = fault_free(3);
  const auto job = launch("elastic-kill", 3, faults(R"({kind = "kill", node = 1, step = 10})"));
  const auto sha = require_finished(*job, {0, 1, 2}, 3);
  const auto& output = job->launcher.output;
  CHECK(contains(output, "[launch] node 1 killed by signal SIGKILL; restarting (1/3)"));
  // The console says the loss, the recovery and the rejoin, one line each (node 0 runs
  // the coordinator); the nodes that finished left, none was "lost (left".
  CHECK(contains(output, "node 1 lost ("));
  CHECK(contains(output, "[node 0] dseek-node: recovered: training goes on from step "));
  CHECK(contains(output, ") rejoined: epoch "));
  CHECK(contains(output, "node 1 left: epoch "));
  CHECK(!contains(output, "lost (left"));
  CHECK(sha == params_of(reference, 0));  // bit for bit
  std::map<int, double> recovery_ms;
  for (int node : {0, 1, 2})
    recovery_ms[node] = recovered(*job, node, kFaultStep, node == 1 ? "peer" : "memory", 3);
  WARN("recovery_ms (kill at step 10, rejoin): " << listing(recovery_ms) << "; training again "
                                                 << fault_to_recovery_ms(*job, 1, "kill")
                                                 << " ms after the kill");
  for (const auto& [node, ms] : recovery_ms) CHECK(ms < kFarBelowCollectiveTimeoutMs);
}

// The link-cut case of the test bed (tests/hosts) on loopback: node 1 is killed at step
// 10 and rejoins; in the epoch that takes it back node 2's data plane cannot connect
// (fail_connect: as UCX's "Destination is unreachable" in ucp_ep_create) while nodes 0
// and 1 wait for it in the connect's barrier. The failed epoch is re-planned at once (a
// new epoch with the same members aborts that barrier), not waited out: before, every
// rank waited for an epoch nobody started until the job gave up ("3 of 3 nodes are
// members ... after waiting 130 s"). The job ends with the fault-free model, bit for bit.
TEST_CASE("a rejoin epoch whose data plane fails to connect is re-planned and the job ends with "
          "the fault-free model", "[elastic][faults]") {
  const Job& reference = fault_free(3);
  const auto job = launch("elastic-connect", 3,
                          faults(R"({kind = "kill", node = 1, step = 10}, )"
                                 R"({kind = "fail_connect", node = 2, step = 10})"));
  const auto sha = require_finished(*job, {0, 1, 2}, 3);
  CHECK(sha == params_of(reference, 0));
  REQUIRE_FALSE(fault_of(job->path(), 2, "fail_connect").empty());
  // Node 2 says which peer it could not reach and that the epoch is re-planned.
  std::string failed;
  for (const auto& line : node_events(job->path(), 2, "training_interrupted"))
    if (contains(line, "\"action\":\"replan\"")) failed = line;
  INFO(job->launcher.output);
  REQUIRE_FALSE(failed.empty());
  CHECK(number_field(failed, "peer_node") == 0);
  CHECK(number_field(failed, "attempt") == 1);
  CHECK(contains(string_field(failed, "error"), "could not connect to node 0 (rank 0 at 127.0.0.1)"));
  CHECK(contains(job->launcher.output, "the coordinator re-plans the epoch in 250 ms (attempt 1 of 3)"));
  // The peers heard of it as a new epoch of the same members.
  bool told = false;
  for (const auto& lost : node_events(job->path(), 0, "node_lost"))
    told = told || string_field(lost, "reason").find("data plane failed on node 2: ") == 0;
  CHECK(told);
  // Back to training well within comm.timeout_ms (30 s): the waiting peers were aborted.
  std::map<int, double> recovery_ms;
  for (int node : {0, 1, 2})
    recovery_ms[node] = recovered(*job, node, kFaultStep, node == 1 ? "peer" : "memory", 3);
  const auto back = node_events(job->path(), 0, "recovered");
  const auto connecting = event_with(job->path(), 2, "epoch_layout", "epoch",
                                     number_field(failed, "epoch"));
  REQUIRE_FALSE(connecting.empty());
  const double after_failure_ms =
      (number_field(back[0], "ts") - number_field(connecting, "ts")) * 1000.0;
  WARN("recovery_ms (kill at step 10, rejoin, its epoch's connect failed once): "
       << listing(recovery_ms) << "; training again " << after_failure_ms
       << " ms after node 2 began to connect in the failed epoch");
  CHECK(after_failure_ms < 10000);
}

TEST_CASE("a node killed for good leaves the job to the survivors", "[elastic][faults]") {
  const Job& reference = fault_free(3);
  const auto job =
      launch("elastic-shrink", 3,
             std::vector<std::string>{"--set", "cluster.max_restarts=0", "--set",
                                      "elastic.rejoin_seconds=1", "--set", "elastic.min_nodes=2"} +
                 faults(R"({kind = "kill", node = 1, step = 10})"));
  require_finished(*job, {0, 2}, 3);
  const auto& output = job->launcher.output;
  CHECK(contains(output, "[launch] node 1 failed 1 time; the job goes on with 2 nodes"));
  CHECK(node_events(job->path(), 1, "train_done").empty());
  std::map<int, double> recovery_ms;
  for (int node : {0, 2}) recovery_ms[node] = recovered(*job, node, kFaultStep, "memory", 2);
  WARN("recovery_ms (kill at step 10, no rejoin, rejoin_seconds 1): " << listing(recovery_ms));
  // Steps 11 to 40 ran on 2 nodes instead of 3: the same batches, summed in another order.
  const double final_difference =
      relative_difference(number_field(train_done(*job, 0), "loss"),
                          number_field(train_done(reference, 0), "loss"));
  const double worst = max_loss_difference(*job, 0, reference);
  WARN("no rejoin: final loss within " << final_difference << ", every step within " << worst
                                       << " relative of the fault-free run's");
  CHECK(final_difference <= kSumOrderTolerance);
  CHECK(worst <= kSumOrderTolerance);
}

TEST_CASE("a node killed for good without consent to shrink ends the job with exit 3",
          "[elastic][faults]") {
  // The same loss as above on 2 nodes, elastic.min_nodes left at 0 (no consent): the
  // survivor still trains to the end (nothing of the run is thrown away), then says that
  // the job finished on fewer nodes than configured, and the job's exit is 3, not 0.
  const auto job =
      launch("elastic-no-consent", 2,
             std::vector<std::string>{"--set", "cluster.max_restarts=0", "--set",
                                      "elastic.rejoin_seconds=1"} +
                 faults(R"({kind = "kill", node = 1, step = 10})"), 20);
  const auto& output = job->launcher.output;
  INFO(output);
  CHECK_FALSE(job->launcher.timed_out);
  CHECK(job->launcher.exit_code == 3);
  CHECK(contains(output, "[launch] node 1 failed 1 time; the job goes on with 1 node "
                         "(elastic.min_nodes = 0, no consent to shrink"));
  CHECK(contains(output, "[node 0] dseek-node: the job finished on 1 of 2 configured nodes "
                         "without consent to shrink: set elastic.min_nodes"));
  CHECK(contains(output, "[launch] job done: 2 nodes, 0 restarts, exit 3"));
  const auto done = node_events(job->path(), 0, "train_done");
  REQUIRE(done.size() == 1);
  CHECK(number_field(done[0], "step") == 20);
  const auto failed = node_events(job->path(), 0, "node_failed");
  REQUIRE(failed.size() == 1);
  CHECK(contains(string_field(failed[0], "reason"), "finished on 1 of 2 configured nodes"));
  require_no_node_left(job->path(), 2);
}

TEST_CASE("survivors that the batch does not split over train on fewer ranks, one stands by",
          "[elastic][faults]") {
  // 4 nodes and a batch of 8; node 1 lost for good leaves 3, over which 8 sequences do
  // not split: the layout takes 2 replicas (nodes 0 and 2, from their memory) and node 3
  // stands by until the job ends.
  const std::vector<std::string> batch8 = {"--set", "train.batch_size=8"};
  const Job& reference = fault_free(2, batch8);
  const auto job =
      launch("elastic-standby", 4,
             batch8 + std::vector<std::string>{"--set", "cluster.max_restarts=0", "--set",
                                               "elastic.rejoin_seconds=1", "--set",
                                               "elastic.min_nodes=3"} +
                 faults(R"({kind = "kill", node = 1, step = 10})"));
  const auto sha = require_finished(*job, {0, 2}, 4);
  CHECK(node_events(job->path(), 3, "train_done").empty());
  const auto layouts = node_events(job->path(), 3, "epoch_layout");
  REQUIRE_FALSE(layouts.empty());
  CHECK(string_field(layouts.back(), "role") == "standby");
  CHECK(number_field(layouts.back(), "data") == 2);
  CHECK(node_events(job->path(), 3, "standby_ended").size() == 1);
  for (int node : {0, 2}) recovered(*job, node, kFaultStep, "memory", 3);
  // The same 8 sequences a step on 4 nodes, then on 2: sums in another order only.
  CHECK(max_loss_difference(*job, 0, reference) <= kSumOrderTolerance);
  CHECK(sha.size() == 64);
}

TEST_CASE("a node that hangs for good is declared lost and the survivors finish",
          "[elastic][faults]") {
  const Job& reference = fault_free(3);
  const auto job = launch("elastic-hang", 3,
                          std::vector<std::string>{"--stop-grace", "2", "--set",
                                                   "elastic.rejoin_seconds=1", "--set",
                                                   "elastic.min_nodes=2"} +
                              faults(R"({kind = "hang", node = 1, step = 10})"));
  require_finished(*job, {0, 2}, 3);
  const auto& output = job->launcher.output;
  // The survivors finished; the hung node ignored SIGTERM and was killed 2 s later.
  CHECK(contains(output, "[launch] node(s) 1 still running 2 s after the job finished"));
  CHECK(contains(output, "[launch] node 1 killed by signal SIGKILL"));
  CHECK(contains(output, "[launch] job done: 3 nodes, 0 restarts, exit 0"));
  CHECK(node_events(job->path(), 1, "train_done").empty());

  const auto hang = fault_of(job->path(), 1, "hang");
  REQUIRE_FALSE(hang.empty());
  std::map<int, double> detection_ms, recovery_ms;
  for (int node : {0, 2}) {
    INFO("node " << node);
    const auto lost = event_with(job->path(), node, "node_lost", "lost_node", 1);
    REQUIRE_FALSE(lost.empty());
    CHECK(contains(string_field(lost, "reason"), "heartbeat timeout"));
    detection_ms[node] = (number_field(lost, "ts") - number_field(hang, "ts")) * 1000.0;
    recovery_ms[node] = recovered(*job, node, kFaultStep, "memory", 2);
  }
  WARN("hang: detected after " << listing(detection_ms) << " (heartbeat timeout 1500 ms); "
                               << "recovery_ms " << listing(recovery_ms));
  for (const auto& [node, ms] : detection_ms) CHECK(ms < kFarBelowCollectiveTimeoutMs);
  CHECK(relative_difference(number_field(train_done(*job, 0), "loss"),
                            number_field(train_done(reference, 0), "loss")) <= kSumOrderTolerance);
}

TEST_CASE("a corrupted gradient is caught by the replica check and repaired from a peer",
          "[elastic][faults]") {
  const Job& reference = fault_free(3);
  const auto job =
      launch("elastic-sdc", 3, faults(R"({kind = "corrupt_gradient", node = 1, step = 10})"));
  const auto sha = require_finished(*job, {0, 1, 2}, 3);
  CHECK(contains(job->launcher.output, "[launch] node 1 exited with status 1; restarting (1/3)"));
  CHECK(sha == params_of(reference, 0));  // the corrupted step never reached the model
  const int bad_rank = first_rank(*job, 1);
  for (int node : {0, 1, 2}) {
    INFO("node " << node);
    const auto sdc = node_events(job->path(), node, "sdc_detected");
    REQUIRE(sdc.size() == 1);
    CHECK(number_field(sdc[0], "step") == kFaultStep + 1);  // the step it corrupted
    CHECK(string_field(sdc[0], "ranks") == std::to_string(bad_rank));
    CHECK(contains(sdc[0], node == 1 ? "\"this_replica\":true" : "\"this_replica\":false"));
  }
  std::map<int, double> recovery_ms;
  for (int node : {0, 1, 2})
    recovery_ms[node] = recovered(*job, node, kFaultStep, node == 1 ? "peer" : "memory", 3);
  WARN("recovery_ms (corrupt_gradient at step 10): "
       << listing(recovery_ms) << "; training again "
       << fault_to_recovery_ms(*job, 1, "corrupt_gradient") << " ms after the corruption");
  for (const auto& [node, ms] : recovery_ms) CHECK(ms < kFarBelowCollectiveTimeoutMs);
}

TEST_CASE("a node killed in the middle of the gradient all-reduce costs nothing",
          "[elastic][faults]") {
  const Job& reference = fault_free(3);
  const auto job = launch("elastic-kill-reduction", 3,
                          faults(R"({kind = "kill", node = 1, step = 10, during = "reduction"})"));
  const auto sha = require_finished(*job, {0, 1, 2}, 3);
  const auto killed = fault_of(job->path(), 1, "kill");
  REQUIRE_FALSE(killed.empty());
  CHECK(string_field(killed, "trigger") == "step 10, during the reduction");
  CHECK(sha == params_of(reference, 0));
  std::map<int, double> recovery_ms;
  for (int node : {0, 1, 2})
    recovery_ms[node] = recovered(*job, node, kFaultStep, node == 1 ? "peer" : "memory", 3);
  WARN("recovery_ms (kill during the reduction of step 11): "
       << listing(recovery_ms) << "; training again " << fault_to_recovery_ms(*job, 1, "kill")
       << " ms after the kill");
  for (const auto& [node, ms] : recovery_ms) CHECK(ms < kFarBelowCollectiveTimeoutMs);
}

namespace {

const std::vector<std::string> kZero1 = {"--set", "parallel.zero=1"};

// Node `node`'s peer_replica events (after the first step of each epoch it trained in,
// and after the job's last step): the shard it keeps is its ring neighbour's, rank
// (r + 1) % N, and it costs 8 bytes per element of that shard each step (m and v): with
// P parameters, 8 P / N give or take the bucket rounding.
void check_peer_replica(const Job& job, int node, int world_size) {
  INFO("node " << node);
  const auto kept = node_events(job.path(), node, "peer_replica");
  REQUIRE_FALSE(kept.empty());
  const auto started = node_events(job.path(), node, "run_started");
  REQUIRE_FALSE(started.empty());
  const double params = number_field(started[0], "params");
  const int rank = first_rank(job, node);
  CHECK(number_field(kept[0], "world_size") == world_size);
  CHECK(number_field(kept[0], "holds_rank") == (rank + 1) % world_size);
  const double expected = 8.0 * params / world_size;
  CHECK(std::abs(number_field(kept[0], "replica_bytes") - expected) <= 0.01 * expected);
  CHECK(number_field(kept[0], "state_bytes") >= 12.0 * params);  // params, m, v kept whole
}

}  // namespace

TEST_CASE("under ZeRO 1 a killed node's shard comes back from its neighbour's memory",
          "[elastic][faults][zero]") {
  const Job& reference = fault_free(3, kZero1);
  const auto job =
      launch("elastic-zero1-peer", 3, kZero1 + faults(R"({kind = "kill", node = 1, step = 10})"));
  const auto sha = require_finished(*job, {0, 1, 2}, 3);
  CHECK(contains(job->launcher.output, "[launch] node 1 killed by signal SIGKILL; restarting (1/3)"));
  std::map<int, double> recovery_ms;
  for (int node : {0, 1, 2}) {
    check_peer_replica(*job, node, 3);
    // Every node rebuilt the whole state with the lost node's shard from its replica.
    recovery_ms[node] = recovered(*job, node, kFaultStep, "peer", 3);
    CHECK(checkpoint_reads(job->path(), node).empty());  // no checkpoint was read
  }
  WARN("recovery_ms (ZeRO 1, kill at step 10, rejoin, from memory): "
       << listing(recovery_ms) << "; training again " << fault_to_recovery_ms(*job, 1, "kill")
       << " ms after the kill");
  for (const auto& [node, ms] : recovery_ms) CHECK(ms < kFarBelowCollectiveTimeoutMs);
  // The whole float32 state was rebuilt and resharded onto the same world: bit for bit.
  CHECK(sha == params_of(reference, 0));
}

TEST_CASE("under ZeRO 2 on 2 nodes a killed node's shard comes back from the other's memory",
          "[elastic][faults][zero]") {
  const std::vector<std::string> zero2 = {"--set", "parallel.zero=2"};
  const Job& reference = fault_free(2, zero2);
  const auto job =
      launch("elastic-zero2-peer", 2, zero2 + faults(R"({kind = "kill", node = 1, step = 10})"));
  const auto sha = require_finished(*job, {0, 1}, 2);
  std::map<int, double> recovery_ms;
  for (int node : {0, 1}) {
    check_peer_replica(*job, node, 2);
    recovery_ms[node] = recovered(*job, node, kFaultStep, "peer", 2);
  }
  WARN("recovery_ms (ZeRO 2, 2 nodes, kill at step 10, rejoin): " << listing(recovery_ms));
  CHECK(sha == params_of(reference, 0));
}

TEST_CASE("under ZeRO 1 the survivors of a node lost for good reshard its state and finish",
          "[elastic][faults][zero]") {
  const Job& reference = fault_free(3, kZero1);
  const auto job = launch("elastic-zero1-shrink", 3,
                          kZero1 +
                              std::vector<std::string>{"--set", "cluster.max_restarts=0", "--set",
                                                       "elastic.rejoin_seconds=1", "--set",
                                                       "elastic.min_nodes=2"} +
                              faults(R"({kind = "kill", node = 1, step = 10})"));
  require_finished(*job, {0, 2}, 3);
  CHECK(contains(job->launcher.output, "[launch] node 1 failed 1 time; the job goes on with 2 nodes"));
  std::map<int, double> recovery_ms;
  for (int node : {0, 2}) {
    recovery_ms[node] = recovered(*job, node, kFaultStep, "peer", 2);
    // After the recovery each survivor keeps the other's shard of the 2-rank world.
    const auto kept = node_events(job->path(), node, "peer_replica");
    REQUIRE(kept.size() == 3);  // world 3's first step; world 2's first and last
    CHECK(number_field(kept[1], "world_size") == 2);
    CHECK(number_field(kept[2], "steps_kept") == kSteps - kFaultStep);
  }
  WARN("recovery_ms (ZeRO 1, kill at step 10, no rejoin): " << listing(recovery_ms));
  // Steps 11 to 40 ran on 2 nodes with the moments resharded: the same batches and the
  // same AdamW state, summed in another order (the tolerance of the ZeRO 0 runs).
  const double val_difference =
      relative_difference(number_field(train_done(*job, 0), "val_loss"),
                          number_field(train_done(reference, 0), "val_loss"));
  const double worst = max_loss_difference(*job, 0, reference);
  WARN("ZeRO 1 no rejoin: val_loss within " << val_difference << ", every step loss within "
                                            << worst << " relative of the fault-free run's");
  CHECK(val_difference <= kSumOrderTolerance);
  CHECK(worst <= kSumOrderTolerance);
}

TEST_CASE("under ZeRO 1 losing a node and its replica's holder resumes from the disk checkpoint",
          "[elastic][faults][checkpoint][zero]") {
  const Job& reference = fault_free(3, kZero1);
  // Synchronous checkpoints: the step-10 checkpoint is committed before step 11 starts.
  // (An asynchronous write of step 5 still in progress at step 10 would skip step 10's,
  // and the job would rightly go back to step 5.) Nodes 1 and 2 die together: in a ring
  // of 3 any two nodes are neighbours, so one of them held the other's only replica.
  const auto job = launch("elastic-zero1-disk", 3,
                          kZero1 +
                              std::vector<std::string>{"--set", "checkpoint.every_steps=5",
                                                       "--set", "checkpoint.async=false"} +
                              faults(R"({kind = "kill", node = 1, step = 12}, )"
                                     R"({kind = "kill", node = 2, step = 12})"));
  const auto sha = require_finished(*job, {0, 1, 2}, 3);
  std::map<int, double> recovery_ms;
  for (int node : {0, 1, 2}) {
    recovery_ms[node] = recovered(*job, node, 10, "disk", 3);
    CHECK_FALSE(event_with(job->path(), node, "resumed", "step", 10).empty());
    const auto back = node_events(job->path(), node, "recovered");
    REQUIRE(back.size() == 1);
    CHECK(contains(string_field(back[0], "reason"), "is on no node of this world"));
  }
  WARN("recovery_ms (ZeRO 1, two neighbours killed at step 12, checkpoint of step 10): "
       << listing(recovery_ms) << "; training again " << fault_to_recovery_ms(*job, 1, "kill")
       << " ms after the kill");
  for (const auto& [node, ms] : recovery_ms) CHECK(ms < kFarBelowCollectiveTimeoutMs);
  // A checkpoint holds the whole float32 state: steps 11 and 12 are done again exactly.
  CHECK(sha == params_of(reference, 0));
  CHECK(number_field(train_done(*job, 0), "loss") ==
        number_field(train_done(reference, 0), "loss"));
}

namespace {

// The sums of a run's step events' `key` on node `node`.
double step_sum(const Job& job, int node, const std::string& key) {
  double sum = 0.0;
  for (const auto& line : node_events(job.path(), node, "step")) sum += number_field(line, key);
  return sum;
}

}  // namespace

TEST_CASE("top-k and INT8 compressed gradients cut the bytes on the wire by 90 percent",
          "[elastic][compression]") {
  // The tiny model on real text for 200 steps (the loss falls from 5.5 to under 3.3),
  // validated on 16 batches; only comm.compression differs between the two runs.
  constexpr int steps = 200;
  const std::vector<std::string> settings = {"--set", "train.eval_batches=16", "--set",
                                             "comm.topk_fraction=0.05"};
  const auto plain =
      launch("elastic-uncompressed", 2,
             settings + std::vector<std::string>{"--set", "comm.compression=\"none\""}, steps);
  const auto compressed =
      launch("elastic-compressed", 2,
             settings + std::vector<std::string>{"--set", "comm.compression=\"topk+int8\""}, steps);
  for (const Job* job : {plain.get(), compressed.get()}) {
    INFO(job->launcher.output);
    REQUIRE(job->launcher.exit_code == 0);
    CHECK(params_of(*job, 0) == params_of(*job, 1));
    require_no_node_left(job->path(), 2);
  }
  const double plain_val = number_field(train_done(*plain, 0), "val_loss");
  const double compressed_val = number_field(train_done(*compressed, 0), "val_loss");

  // Per step, each node sends its encoded gradient (top 5% of the entries as 4-byte
  // indices and INT8 values with a float scale per block: 6.3% of the float32 bytes) plus
  // the small replica checks, and every 20 steps (comm.variance_refresh_steps) its
  // second-moment estimate in bf16 (a ring all-reduce: 50%): 8.8% over the run. Uncompressed, a ring
  // all-reduce of 2 sends 100%.
  double sent_ratio = 0.0, encoded_ratio = 0.0;
  for (int node : {0, 1}) {
    const double grad_bytes = step_sum(*compressed, node, "grad_bytes");
    REQUIRE(grad_bytes > 0);
    sent_ratio = std::max(sent_ratio, step_sum(*compressed, node, "comm_bytes_sent") / grad_bytes);
    encoded_ratio =
        std::max(encoded_ratio, step_sum(*compressed, node, "grad_encoded_bytes") / grad_bytes);
  }
  const double plain_sent_ratio =
      step_sum(*plain, 0, "comm_bytes_sent") / step_sum(*plain, 0, "grad_bytes");
  const double gap = (compressed_val - plain_val) / plain_val;
  WARN("topk+int8 (5%), 2 nodes, " << steps << " steps: bytes sent " << sent_ratio
                                   << " of the gradient bytes (encoded " << encoded_ratio
                                   << ", uncompressed run " << plain_sent_ratio << "); val_loss "
                                   << compressed_val << " against " << plain_val
                                   << " uncompressed (" << 100 * gap << "% higher)");
  CHECK(sent_ratio <= 0.10);  // the whole run: every byte the data plane sent
  CHECK(encoded_ratio <= 0.10);
  CHECK(plain_sent_ratio >= 0.99);
  CHECK(compressed_val < 3.6);  // it learns: 5.55 (ln 256) at the start
  // AdamW's second moment comes from the replicas' dense local gradients (refreshed every
  // 20 steps), not from the late, bunched top-k arrivals that shrank the steps of rarely
  // sent coordinates: the gap fell from 9.3% (v from the compressed gradients) to 4.4% on
  // this job; the estimate for the MEAN gradient (the local noise divided by the number
  // of replicas), each tensor's update capped at an RMS of 1 (a fixed v does not follow
  // gradients that grow) and comm.compressed_beta1 = 0.6 (error feedback already carries
  // gradients forward) brought it to 2.25%. Over seeds 1337, 1, 2, 3, 4 it is 2.25, 5.2,
  // 0.4, 2.3, -1.9% (mean 1.7%; before: 4.4, 3.2, 1.5, 3.5, 0.7%, mean 2.7%;
  // bench/compression_gap.sh; seed 1 is above the goal, the mean and the default job,
  // 2.56%, are below). The bound is the goal (dseek issue 5); float rounding differences
  // between machines move a 200-step run by a few tenths of a point.
  CHECK(gap <= 0.03);
}
