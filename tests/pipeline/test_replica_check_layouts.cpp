// Replica checksums in the stage trainer's layouts (pipeline/stage_trainer.hpp: the data
// group of a pipeline stage or a tensor rank compares checksums of its reduced gradients
// and updated parameters every train.replica_check_every steps), through `dseek launch`
// on 4 nodes: two replicas of a 2-stage pipeline (D=2 x P=2) and of a 2-rank tensor
// group (D=2 x T=2).
//
// Fault-free, the replicas agree bit for bit at every step: no sdc_detected anywhere (a
// check that compares anything else than the same bits fails here). A corrupt_gradient
// on node 3 (replica 1) at step 10 flips one exponent bit of its reduced gradient: node
// 3's data group (nodes 1 and 3: stage 1, or tensor rank 1) names replica 1 at step 11
// (1-based) in its gradients, node 3 as this replica, and the other data group (nodes 0
// and 2) sees nothing; node 3 leaves and exits, and the survivors re-plan and finish as
// after a lost node (tests/support/lost_node_launch.hpp: resumed from the step-8
// checkpoint, val_loss within 1e-5 relative of the fault-free run's).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/lost_node_launch.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kChecked = {"--set", "train.replica_check_every=1", "--set",
                                           "train.threads=1", "--set", "train.eval_every=0",
                                           "--set", "parallel.data=2"};

void check_sdc_events(const std::filesystem::path& run) {
  for (int node = 0; node < 4; ++node) {
    INFO("node " << node);
    const auto sdc = node_events(run, node, "sdc_detected");
    if (node == 0 || node == 2) {  // the other data group agrees
      CHECK(sdc.empty());
      continue;
    }
    REQUIRE(sdc.size() == 1);
    CHECK(number_field(sdc[0], "step") == 11);
    CHECK(string_field(sdc[0], "checked") == "gradients");
    CHECK(string_field(sdc[0], "ranks") == "1");
    CHECK(sdc[0].find(node == 3 ? "\"this_replica\":true" : "\"this_replica\":false") !=
          std::string::npos);
  }
}

void check_layout(const std::string& name, const std::vector<std::string>& layout, int pipeline,
                  int tensor) {
  const std::vector<std::string> job = kChecked + layout;
  SECTION("fault-free: the replicas agree at every step") {
    ScratchDir run(name + "-agree");
    const auto result = run_process(tiny_launch(run.path(), 4, 6, job), 180s, launch_env());
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    for (int node = 0; node < 4; ++node) {
      INFO("node " << node);
      CHECK(node_events(run.path(), node, "train_done").size() == 1);
      CHECK(node_events(run.path(), node, "sdc_detected").empty());
    }
  }
  SECTION("a corrupted gradient is named by its data group and the node leaves") {
    LostNodeJob lost;
    lost.name = name + "-corrupt";
    lost.job = job;
    lost.nodes = 4;
    lost.data = 1;
    lost.pipeline = pipeline;
    lost.tensor = tensor;
    lost.fault = "corrupt_gradient";
    lost.from_memory = true;  // the corrupted replica leaves; replica 0 holds every position
    lost.also_check = check_sdc_events;
    check_lost_node_recovers(lost);
  }
}

}  // namespace

TEST_CASE("replica checks: D=2 x P=2 catch a corrupted gradient in a pipeline stage's data group",
          "[pp][launch][faults][sdc]") {
  check_layout("pp-sdc", {"--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=2"}, 2, 1);
}

TEST_CASE("replica checks: D=2 x T=2 catch a corrupted gradient in a tensor rank's data group",
          "[tp][launch][faults][sdc]") {
  check_layout("tp-sdc", {"--set", "parallel.tensor=2"}, 1, 2);
}
