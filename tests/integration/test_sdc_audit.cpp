// The SDC audit end to end (runtime/train/sdc_audit.hpp): `dseek launch` jobs of three
// local dseek-node processes training the tiny model, one of them with a faulty "GPU":
// a corrupt_gradient fault with where = "local" and every_step = true flips a bit of its
// own gradient at every step before the reduction, so every replica's sum is poisoned
// alike and the replica check (which compares the sums) sees nothing. With the audit the
// node is named within one audit period, evicted for good (exit 4, never restarted),
// and the other two redo the step without it, exactly as after losing that node at that
// step (the node that hosts the coordinator stops training instead and coordinates to
// the end); without the audit the job ends "fine" on a poisoned model. An auditor that
// recomputes wrong (where = "audit") is cleared by a second auditor and changes no bit.
// And over 1000 audited steps no correct node is accused and the audits change no bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "support/launched_job.hpp"
#include "support/node_runs.hpp"

using namespace dseek::testing;

namespace {

constexpr int kSteps = 30;
// Audits at the 0-based steps 0, 10 and 20; the node goes bad from step 12, so the audit
// of step 20 (the first after it) must find it.
constexpr int kAuditStep = 20;

const std::vector<std::string> kSettings = {
    "--set", "train.threads=1", "--set", "train.eval_every=0", "--set", "train.sdc_audit_every=10",
    // Consent to finish on two nodes (without it a shrunk job ends with exit 3).
    "--set", "elastic.min_nodes=2"};

const std::string kBadGpuOnNode2 =
    R"({kind = "corrupt_gradient", node = 2, step = 12, where = "local", every_step = true})";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Each of `nodes` recovered once, from its own memory, at the audit's step, on 2 nodes.
void check_recovered_from_memory(const LaunchedJob& job, const std::vector<int>& nodes) {
  for (int node : nodes) {
    INFO("node " << node);
    const auto recovered = node_events(job.path(), node, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(number_field(recovered[0], "from_step") == kAuditStep);
    CHECK(string_field(recovered[0], "source") == "memory");
    CHECK(number_field(recovered[0], "world_size") == 2);
  }
}

}  // namespace

TEST_CASE("sdc audit: a node whose own gradients are wrong at every step is named within one "
          "audit period, evicted, and the job goes on as after losing it",
          "[sdc][faults]") {
  const auto job = launch_tiny_job("sdc-evict", 3, kSteps, kSettings + faults(kBadGpuOnNode2));
  // The same bad node killed (and not restarted) at the audit's step instead.
  const auto reference = launch_tiny_job(
      "sdc-evict-reference", 3, kSteps,
      kSettings + std::vector<std::string>{"--set", "cluster.max_restarts=0"} +
          faults(kBadGpuOnNode2 + R"(, {kind = "kill", node = 2, step = 20})"));
  const std::string sha = require_finished(*job, {0, 1}, 3, kSteps);
  require_finished(*reference, {0, 1}, 3, kSteps);
  INFO(job->launcher.output);
  CHECK(contains(job->launcher.output, "[launch] node 2 exited with status 4 (the SDC audit found it "
                                       "computing wrong gradients): not restarted"));
  for (int node : {0, 1, 2}) {
    INFO("node " << node);
    const std::string seen = sdc_eviction_seen(job->path(), node);
    REQUIRE_FALSE(seen.empty());
    if (contains(seen, "\"sdc_detected\"")) {
      CHECK(number_field(seen, "step") == kAuditStep + 1);
      CHECK(string_field(seen, "checked") == "local gradients");
      CHECK(string_field(seen, "nodes") == "2");
      CHECK(contains(seen, node == 2 ? "\"this_rank\":true" : "\"this_rank\":false"));
    } else {
      CHECK(node != 2);  // the evicted node itself always has its verdict
      CHECK(contains(seen, "SDC audit at step " + std::to_string(kAuditStep + 1)));
    }
  }
  CHECK(node_events(job->path(), 2, "train_done").empty());
  const auto failed = node_events(job->path(), 2, "node_failed");
  REQUIRE(failed.size() == 1);
  CHECK(contains(string_field(failed[0], "reason"), "SDC audit at step 21"));
  check_recovered_from_memory(*job, {0, 1});
  // The poisoned step 20 never reached the model: bit for bit the run that lost the node
  // before it.
  CHECK(sha == params_of(*reference, 0));
}

TEST_CASE("sdc audit: a wrong node that hosts the coordinator stops training, coordinates "
          "the others to the job's end, then exits as evicted",
          "[sdc][faults]") {
  // Node 0 hosts the coordinator: without a coordinator failover its leaving would end
  // the job, so it is taken out of the plan instead, and stays. It goes bad at the
  // audit's step, so no poisoned update came before.
  const std::string bad_gpu_on_node0 = R"({kind = "corrupt_gradient", node = 0, step = )" +
                                       std::to_string(kAuditStep) +
                                       R"(, where = "local", every_step = true})";
  const auto job = launch_tiny_job("sdc-evict-coordinator", 3, kSteps, kSettings + faults(bad_gpu_on_node0));
  // Nodes 1 and 2 then hold ranks 0 and 1, as nodes 0 and 1 do after losing node 2 at
  // that step: the same slices of every batch, from the same state in memory, so the
  // same model.
  const auto reference = launch_tiny_job(
      "sdc-evict-coordinator-reference", 3, kSteps,
      kSettings + std::vector<std::string>{"--set", "cluster.max_restarts=0"} +
          faults(R"({kind = "kill", node = 2, step = )" + std::to_string(kAuditStep) + "}"));
  const std::string sha = require_finished(*job, {1, 2}, 3, kSteps);
  require_finished(*reference, {0, 1}, 3, kSteps);
  CHECK(sha == params_of(*reference, 0));
  INFO(job->launcher.output);
  CHECK(contains(job->launcher.output, "[launch] node 0 exited with status 4 (the SDC audit found it "
                                       "computing wrong gradients): not restarted"));
  const auto detected = node_events(job->path(), 0, "sdc_detected");
  REQUIRE(detected.size() == 1);
  CHECK(number_field(detected[0], "step") == kAuditStep + 1);
  CHECK(string_field(detected[0], "nodes") == "0");
  CHECK(contains(detected[0], "\"this_rank\":true"));
  CHECK(node_events(job->path(), 0, "train_done").empty());
  CHECK(node_events(job->path(), 0, "node_failed").empty());
  CHECK(node_events(job->path(), 0, "standby_ended").size() == 1);
  const auto stopping = node_events(job->path(), 0, "node_stopping");
  REQUIRE(stopping.size() == 1);
  CHECK(contains(string_field(stopping[0], "reason"), "evicted by the SDC audit"));
  check_recovered_from_memory(*job, {1, 2});
}

TEST_CASE("sdc audit: without it, a node's wrong local gradients reach every replica alike "
          "and the replica check sees nothing",
          "[sdc][faults]") {
  const std::vector<std::string> no_audit = {"--set", "train.sdc_audit_every=0"};
  const auto job = launch_tiny_job("sdc-unaudited", 3, kSteps, kSettings + no_audit + faults(kBadGpuOnNode2));
  const auto clean = launch_tiny_job("sdc-unaudited-reference", 3, kSteps, kSettings + no_audit);
  const std::string poisoned = require_finished(*job, {0, 1, 2}, 3, kSteps);
  CHECK(poisoned != require_finished(*clean, {0, 1, 2}, 3, kSteps));
  for (int node : {0, 1, 2}) CHECK(node_events(job->path(), node, "sdc_detected").empty());
}

TEST_CASE("sdc audit: an auditor that recomputes wrong is cleared by a second auditor, and "
          "training goes on unchanged",
          "[sdc][faults]") {
  // Node 1's recomputations for the audit are wrong (its own gradients are right): at
  // each audit it accuses its target, whose second auditor recomputes the slice in the
  // middle of its own step (its reduced gradients put aside and back) and clears it.
  const auto job = launch_tiny_job(
      "sdc-wrong-auditor", 3, kSteps,
      kSettings + faults(R"({kind = "corrupt_gradient", node = 1, step = 0, where = "audit", every_step = true})"));
  const auto clean = launch_tiny_job("sdc-wrong-auditor-reference", 3, kSteps, kSettings);
  const std::string sha = require_finished(*job, {0, 1, 2}, 3, kSteps);
  CHECK(sha == require_finished(*clean, {0, 1, 2}, 3, kSteps));
  const auto started = node_events(job->path(), 1, "worker_started");
  REQUIRE_FALSE(started.empty());
  const std::string auditor = std::to_string(static_cast<int>(number_field(started[0], "rank")));
  for (int node : {0, 1, 2}) {
    INFO("node " << node);
    CHECK(node_events(job->path(), node, "sdc_detected").empty());
    int audits = 0;
    for (const auto& step : node_events(job->path(), node, "step")) {
      if (!contains(step, "\"sdc_audit_ms\"")) continue;
      ++audits;
      CHECK(string_field(step, "sdc_cleared_auditors") == auditor);
    }
    CHECK(audits == kSteps / 10);  // steps 1, 11 and 21
  }
}

TEST_CASE("sdc audit: over 1000 audited steps no correct node is accused, and the audits "
          "change no bit",
          "[sdc]") {
  constexpr int kLongSteps = 1000;
  const std::vector<std::string> every_step = {"--set", "train.threads=1", "--set", "train.eval_every=0",
                                               "--set", "train.sdc_audit_every=1"};
  const std::vector<std::string> never = {"--set", "train.threads=1", "--set", "train.eval_every=0",
                                          "--set", "train.sdc_audit_every=0"};
  const auto audited = launch_tiny_job("sdc-no-false-accusation", 3, kLongSteps, every_step,
                                       std::chrono::seconds(400));
  const auto plain = launch_tiny_job("sdc-no-audit", 3, kLongSteps, never, std::chrono::seconds(400));
  const std::string sha = require_finished(*audited, {0, 1, 2}, 3, kLongSteps);
  CHECK(sha == require_finished(*plain, {0, 1, 2}, 3, kLongSteps));
  std::vector<double> audit_share;
  for (int node : {0, 1, 2}) {
    INFO("node " << node);
    CHECK(node_events(audited->path(), node, "sdc_detected").empty());
    const auto steps = node_events(audited->path(), node, "step");
    REQUIRE(steps.size() == static_cast<size_t>(kLongSteps));
    size_t audits = 0;
    for (const auto& step : steps) {
      CHECK_FALSE(contains(step, "sdc_cleared_auditors"));
      if (contains(step, "\"sdc_audit_ms\"")) {
        ++audits;
        audit_share.push_back(number_field(step, "sdc_audit_ms") / number_field(step, "step_ms"));
      }
    }
    CHECK(audits == static_cast<size_t>(kLongSteps));  // every step was audited
  }
  std::sort(audit_share.begin(), audit_share.end());
  WARN("an audit (recomputing one replica's slice and the verdict) took a median "
       << audit_share[audit_share.size() / 2] << " of its step's time (3 nodes on this machine's cores)");
}
