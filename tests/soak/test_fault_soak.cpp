// The random-fault soak (label: soak): a 4-node data-parallel `dseek launch` job of the
// tiny GPT, global batch 8 (it does not split over 3 nodes: a node lost for good would
// leave 2 replicas and a standby), with `--faults-seed N`: a seeded schedule of a kill,
// a hang, crash_actor of every actor kind, slow and drop_messages at random nodes and
// steps (actors/faults/random_faults.hpp). Every fault is one the node recovers from in
// place, so the job must end with the fault-free run's parameters bit for bit
// (params_sha256 of every node's train_done), every scheduled fault that came due fired
// (a node lost for a while may come back after its later faults' steps), and no node
// process left behind. The same with a pipeline x data layout (2 stages x 2 replicas,
// micro-batches of 2) and a tensor x data one (tensor groups of 2 x 2 replicas), whose
// nodes recover from their peers' memory as well: measured bit-identical too, so they
// are held to the same standard (no tolerance).
//
// CI runs the fixed seeds below (about a minute in all on 2 cores); by hand,
// DSEEK_SOAK_SEED=<n> (or "random") runs that seed instead. On a failure the seed and
// the schedule are in the message (the launcher prints the schedule, replayable with
// `dseek launch --faults-seed <n>` and the same settings).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kNodes = 4;
constexpr int kSteps = 60;
// The seeds CI runs (one each, to keep the label near a minute; seeds 1-11 passed on
// the data-parallel job, 1 and 2 on the pipeline x data one, 1-5 on the tensor x data
// one): 14 faults each, all the
// layout's actor crashes, a kill in the reduction, two hangs (one in the reduction with
// seed 1), slow steps, dropped heartbeats.
const std::vector<uint64_t> kCiSeeds = {1};
const std::vector<uint64_t> kCiPipelineSeeds = {2};
const std::vector<uint64_t> kCiTensorSeeds = {3};
const std::vector<std::string> kPipelineByData = {
    "--set", "parallel.pipeline=2", "--set", "parallel.data=2", "--set",
    "train.micro_batch_size=2", "--set", "checkpoint.every_steps=5", "--set",
    "checkpoint.async=false"};
const std::vector<std::string> kTensorByData = {
    "--set", "parallel.tensor=2", "--set", "parallel.data=2", "--set",
    "checkpoint.every_steps=5", "--set", "checkpoint.async=false"};

// One compute thread per node, evaluation at the end only, batch 8 over 4 nodes; a node
// that did not come back within elastic.rejoin_seconds may leave the job to 3 (so a
// failure shows as a parameter mismatch with the seed, not as a stuck job).
std::vector<std::string> soak_settings() {
  return {"--set", "train.threads=1",     "--set", "train.eval_every=0",
          "--set", "train.batch_size=8",  "--set", "elastic.min_nodes=3"};
}

std::vector<uint64_t> seeds(const std::vector<uint64_t>& in_ci) {
  const char* chosen = std::getenv("DSEEK_SOAK_SEED");
  if (chosen == nullptr || *chosen == '\0') return in_ci;
  if (std::string(chosen) == "random") return {std::random_device{}()};
  return {std::stoull(chosen)};
}

struct Run {
  explicit Run(const std::string& tag) : dir(tag) {}
  ScratchDir dir;
  ProcessResult launcher;
};

void launch(Run& run, const std::vector<std::string>& extra) {
  run.launcher = run_process(tiny_launch(run.dir.path(), kNodes, kSteps, soak_settings() + extra),
                             240s, launch_env());
}

// Every node's params_sha256 after a clean exit (all the same).
std::string finished(const Run& run) {
  INFO(run.launcher.output);
  CHECK_FALSE(run.launcher.timed_out);
  REQUIRE(run.launcher.exit_code == 0);
  const std::string sha = final_params_sha256(run.dir.path(), 0, kSteps);
  for (int node = 1; node < kNodes; ++node) {
    INFO("node " << node);
    CHECK(final_params_sha256(run.dir.path(), node, kSteps) == sha);
  }
  require_no_node_left(run.dir.path(), kNodes);
  return sha;
}

// How many faults the launcher's schedule line lists ("... N random faults ...").
size_t scheduled_faults(const std::string& output) {
  const std::string mark = "random faults (after the config's 0)";
  const auto at = output.find(mark);
  REQUIRE(at != std::string::npos);
  const auto start = output.rfind(' ', at - 2);
  return std::stoul(output.substr(start + 1, at - start - 2));
}

size_t fired_faults(const Run& run) {
  size_t fired = 0;
  for (int node = 0; node < kNodes; ++node)
    fired += node_events(run.dir.path(), node, "fault_injected").size();
  return fired;
}

// How many of the schedule's faults come due: a fault at (node, step) fires at that
// step's boundary, so on a node that ran the step (its step event). A node lost for a
// while (a hang) may find the others past its later faults' steps when it is back: the
// world went on without it, and those never come due.
size_t due_faults(const Run& run) {
  const std::string& output = run.launcher.output;
  const auto begin = output.find("faults=[");
  REQUIRE(begin != std::string::npos);
  const auto end = output.find("]'", begin);
  const std::string schedule = output.substr(begin, end - begin);
  std::vector<std::vector<std::string>> steps_of(kNodes);
  for (int node = 0; node < kNodes; ++node) steps_of[node] = node_events(run.dir.path(), node, "step");
  size_t due = 0;
  const std::regex table("\\{([^}]*)\\}"), node_key("node = (\\d+)"), step_key("step = (\\d+)");
  for (auto it = std::sregex_iterator(schedule.begin(), schedule.end(), table);
       it != std::sregex_iterator(); ++it) {
    const std::string fields = (*it)[1];
    std::smatch node, step;
    const int at_node = std::regex_search(fields, node, node_key) ? std::stoi(node[1]) : 0;
    REQUIRE(std::regex_search(fields, step, step_key));
    const double ran = std::stod(step[1]) + 1;  // the step event counts completed steps
    for (const auto& line : steps_of[static_cast<size_t>(at_node)])
      if (number_field(line, "step") == ran) {
        ++due;
        break;
      }
  }
  return due;
}

// The fault-free run of `layout`, then each seed's faulty run, compared bit for bit.
void soak(const std::vector<std::string>& layout, const std::vector<uint64_t>& seeds) {
  Run reference("soak-reference");
  launch(reference, layout);
  const std::string expected = finished(reference);
  for (const uint64_t seed : seeds) {
    INFO("faults seed " << seed << " (replay: DSEEK_SOAK_SEED=" << seed << ")");
    Run faulty("soak-" + std::to_string(seed));
    const auto start = std::chrono::steady_clock::now();
    launch(faulty, layout + std::vector<std::string>{"--faults-seed", std::to_string(seed)});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string got = finished(faulty);
    INFO(faulty.launcher.output);
    CHECK(got == expected);  // bit for bit
    const size_t scheduled = scheduled_faults(faulty.launcher.output);
    CHECK(scheduled >= 11);  // kill, hang, 7 actor crashes, slow, drop_messages
    const size_t fired = fired_faults(faulty), due = due_faults(faulty);
    CHECK(fired >= due);
    CHECK(fired <= scheduled);
    CHECK(due >= 8);  // the schedule ran: most of it came due
    if (fired < scheduled)
      WARN(scheduled - fired << " faults did not come due: their node was out of the world at their steps");
    CHECK(faulty.launcher.output.find("restarting (1/") != std::string::npos);  // the kill
    WARN("faults seed " << seed << ": " << scheduled << " faults, " << seconds << " s");
  }
}

}  // namespace

TEST_CASE("a seeded random fault schedule ends with the fault-free run's parameters",
          "[soak][faults]") {
  soak({}, seeds(kCiSeeds));
}

TEST_CASE("a pipeline x data job under a seeded random fault schedule ends bit-identical",
          "[soak][faults][pp]") {
  soak(kPipelineByData, seeds(kCiPipelineSeeds));
}

TEST_CASE("a tensor x data job under a seeded random fault schedule ends bit-identical",
          "[soak][faults][tp]") {
  soak(kTensorByData, seeds(kCiTensorSeeds));
}

TEST_CASE("dseek launch refuses a bad --faults-seed and a job too small for a schedule",
          "[soak][faults]") {
  ScratchDir dir("soak-usage");
  auto bad = run_process(tiny_launch(dir.path(), kNodes, kSteps, {"--faults-seed", "-1"}), 30s,
                         launch_env());
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("--faults-seed needs a number from 0 to 2^64 - 1, not '-1'") !=
        std::string::npos);
  auto small = run_process(tiny_launch(dir.path(), 2, kSteps, {"--faults-seed", "3"}), 30s,
                           launch_env());
  CHECK(small.exit_code == 2);
  CHECK(small.output.find("--faults-seed: a random fault schedule needs at least 3 nodes") !=
        std::string::npos);
}
