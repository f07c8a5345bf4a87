// The SDC audit in the stage trainer's layouts (runtime/train/pipeline/stage_audit.cpp):
// three replicas of a 2-stage pipeline (D=3 x P=2) and of a 2-rank tensor group (D=3 x
// T=2), six nodes through `dseek launch`. An audit's recomputation runs a whole replica
// (its stages exchange activations, its tensor ranks their all-reduces) on another
// replica's slice; each data group compares, the world agrees. Node 3 (replica 1, stage
// or tensor rank 1) goes bad at step 5 (corrupt_gradient, where = "local", every step):
// the audit of step 8 names it on every node, it leaves with exit 4, and the five
// survivors re-plan at once (two replicas, one node standing by) and finish with one
// model.
// Fault-free, an audit at every step names nobody.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kNodes = 6;
constexpr int kSteps = 14;

std::vector<std::string> audited(int every) {
  return {"--set", "train.threads=1", "--set", "train.eval_every=0", "--set", "parallel.data=3",
          "--set", "train.sdc_audit_every=" + std::to_string(every), "--set", "elastic.min_nodes=4"};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void check_layout(const std::string& name, const std::vector<std::string>& layout) {
  SECTION("fault-free: audited at every step, nobody is accused") {
    ScratchDir run(name + "-clean");
    const auto result = run_process(tiny_launch(run.path(), kNodes, 6, audited(1) + layout), 240s, launch_env());
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    for (int node = 0; node < kNodes; ++node) {
      INFO("node " << node);
      CHECK(node_events(run.path(), node, "train_done").size() == 1);
      CHECK(node_events(run.path(), node, "sdc_detected").empty());
      for (const auto& step : node_events(run.path(), node, "step")) {
        CHECK(contains(step, "\"sdc_audit_ms\""));
        CHECK_FALSE(contains(step, "sdc_cleared_auditors"));
      }
    }
  }
  SECTION("a node whose own gradients are wrong is named by the audit and evicted") {
    ScratchDir run(name + "-bad-node");
    const auto result = run_process(
        tiny_launch(run.path(), kNodes, kSteps,
                    audited(4) + layout +
                        faults(R"({kind = "corrupt_gradient", node = 3, step = 5, where = "local", every_step = true})")),
        240s, launch_env());
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    CHECK(contains(result.output, "[launch] node 3 exited with status 4"));
    std::string sha;
    int standing_by = 0;  // five survivors: two replicas of two ranks train, one stands by
    for (int node = 0; node < kNodes; ++node) {
      INFO("node " << node);
      const std::string seen = sdc_eviction_seen(run.path(), node);
      REQUIRE_FALSE(seen.empty());
      if (contains(seen, "\"sdc_detected\"")) {
        CHECK(number_field(seen, "step") == 9);  // the audit of the 0-based step 8
        CHECK(string_field(seen, "nodes") == "3");
        CHECK(contains(seen, node == 3 ? "\"this_rank\":true" : "\"this_rank\":false"));
      } else {
        CHECK(node != 3);  // the evicted node itself always has its verdict
        CHECK(contains(seen, "SDC audit at step 9"));
      }
      const auto done = node_events(run.path(), node, "train_done");
      const auto layouts = node_events(run.path(), node, "epoch_layout");
      REQUIRE_FALSE(layouts.empty());
      if (node == 3 || string_field(layouts.back(), "role") == "standby") {
        standing_by += node == 3 ? 0 : 1;
        CHECK(done.empty());
        continue;
      }
      REQUIRE(done.size() == 1);
      CHECK(number_field(done[0], "step") == kSteps);
      if (sha.empty()) sha = string_field(done[0], "params_sha256");
      CHECK(string_field(done[0], "params_sha256") == sha);
    }
    CHECK(standing_by == 1);
    require_no_node_left(run.path(), kNodes);
  }
}

}  // namespace

TEST_CASE("sdc audit: D=3 x P=2 finds and evicts a node of a pipeline stage", "[pp][launch][faults][sdc]") {
  check_layout("pp-audit", {"--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=2"});
}

TEST_CASE("sdc audit: D=3 x T=2 finds and evicts a tensor rank's node", "[tp][launch][faults][sdc]") {
  check_layout("tp-audit", {"--set", "parallel.tensor=2"});
}
