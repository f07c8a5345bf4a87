// dseek-node in a Slurm environment without a Slurm (the variables set by hand): a
// malformed node list stops it with an error naming the variable, the command line wins
// over what Slurm says and the node prints both, and the nodes of `dseek launch` take
// nothing from a Slurm job it runs in. tests/slurm/ runs the real thing.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// Task 2 of 3 of an srun step of job 12 on gpu[01-03] (scripts/test.sh sets
// DSEEK_CLUSTER_ENV=none for the suite: these tests want the environment read).
std::vector<std::string> slurm_task(const std::string& nodelist = "gpu[01-03]") {
  return {"DSEEK_CLUSTER_ENV=auto", "SLURM_JOB_ID=12",     "SLURM_STEP_ID=0",
          "SLURM_PROCID=2",         "SLURM_NTASKS=3",      "SLURM_LOCALID=0",
          "SLURM_NODEID=2",         "SLURM_STEP_NODELIST=" + nodelist,
          "SLURMD_NODENAME=gpu03",  "DSEEK_CLUSTER_SECRET=cluster-env-test"};
}

}  // namespace

TEST_CASE("dseek-node under a malformed SLURM_STEP_NODELIST stops with an error naming it",
          "[node][cluster_env]") {
  ScratchDir run("cluster-env-bad");
  const auto result = run_process(tiny_job(run.path(), 2), 30s, slurm_task("gpu[01-03"));
  INFO(result.output);
  CHECK(result.exit_code == 3);  // permanent: a restart would read the same environment
  CHECK_THAT(result.output,
             Contains("dseek-node: cluster environment error: SLURM_STEP_NODELIST=gpu[01-03: not "
                      "a Slurm host list: 'gpu[01-03': '[' without ']'"));
}

TEST_CASE("the command line (--node-id, --set) wins over Slurm's environment, and the node says what it took",
          "[node][cluster_env]") {
  ScratchDir run("cluster-env-wins");
  const auto result = run_process(
      tiny_job(run.path(), 3, {"--node-id", "0", "--set", "cluster.nodes=1"}), 60s, slurm_task());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Contains("dseek-node: started by Slurm (job 12); from its environment:"));
  CHECK_THAT(result.output, Contains("cluster.node_id = 2  <- SLURM_PROCID=2  [not taken: the "
                                     "config or --set sets cluster.node_id]"));
  CHECK_THAT(result.output, Contains("cluster.nodes = 3  <- SLURM_NTASKS=3  [not taken"));
  CHECK_THAT(result.output, Contains("train.run_dir = \"runs/slurm-12\"  <- SLURM_JOB_ID=12  [not taken"));
  // Taken: the coordinator (a single-node job listens on loopback anyway) and the host.
  CHECK_THAT(result.output, Contains("cluster.coordinator = \"gpu01:20012\"  <- first host of "
                                     "SLURM_STEP_NODELIST=gpu[01-03]"));
  CHECK_THAT(result.output, Contains("cluster.advertise_host = \"gpu03\"  <- SLURMD_NODENAME=gpu03\n"));
  const auto done = node_events(run.path(), 0, "train_done");
  REQUIRE(done.size() == 1);
  CHECK(number_field(done[0], "step") == 3);
}

TEST_CASE("the nodes of dseek launch take nothing from a Slurm job it runs in",
          "[launch][cluster_env]") {
  ScratchDir run("cluster-env-launch");
  auto env = launch_env();
  for (const auto& variable : slurm_task()) env.push_back(variable);
  const auto result = run_process(tiny_launch(run.path(), 2, 3), 60s, env);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(result.output.find("started by Slurm") == std::string::npos);
  for (int node = 0; node < 2; ++node) CHECK(node_events(run.path(), node, "train_done").size() == 1);
  require_no_node_left(run.path(), 2);
}
