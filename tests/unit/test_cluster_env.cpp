// Tests of what dseek-node takes from Slurm's and Kubernetes' environment
// (runtime/cluster_env/cluster_env.hpp): the settings and where each came from, the
// user's keys winning (config file, --set, --node-id, --run-dir), the report printed at
// start, errors naming the variable, and the config that comes out of it all.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "runtime/cluster_env/cluster_env.hpp"
#include "runtime/config/load.hpp"
#include "support/test_paths.hpp"

namespace env = dseek::cluster_env;
namespace config = dseek::config;
using Catch::Matchers::Contains;
using Variables = std::map<std::string, std::string>;

namespace {

// The environment of task 1 of `srun -n 4` in job 4242 on gpu[01-02] (two tasks each).
Variables slurm_task() {
  return {{"SLURM_JOB_ID", "4242"},         {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", "3"},            {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", "1"},           {"SLURM_NODEID", "1"},
          {"SLURM_JOB_NODELIST", "gpu[01-02,07]"}, {"SLURM_STEP_NODELIST", "gpu[01-02]"},
          {"SLURMD_NODENAME", "gpu02"}};
}

// Pod 2 of the Indexed Job "trainer" of 4 pods behind the headless Service "dseek".
Variables kubernetes_pod() {
  return {{"JOB_COMPLETION_INDEX", "2"}, {"DSEEK_NODES", "4"},
          {"DSEEK_HEADLESS_SERVICE", "dseek"}, {"HOSTNAME", "trainer-2"}};
}

env::Detected detect(const Variables& variables) {
  return env::detect(env::fixed_environment(variables));
}

std::map<std::string, std::string> values_of(const env::Detected& detected) {
  std::map<std::string, std::string> values;
  for (const auto& setting : detected.settings) values[setting.key] = setting.value;
  return values;
}

std::string error_of(const Variables& variables) {
  try {
    detect(variables);
  } catch (const env::ClusterEnvError& error) {
    return error.what();
  }
  FAIL("expected a ClusterEnvError");
  return {};
}

// What dseek-node does: the environment's settings under the user's, then the config.
config::JobConfig node_config(env::Detected& detected, const std::string& toml,
                              const std::vector<std::string>& sets) {
  dseek::testing::ScratchDir dir("cluster-env");
  const auto file = dir / "job.toml";
  std::ofstream(file) << toml;
  auto overrides = env::overrides_for(detected, config::keys_set_by(file, sets));
  overrides.insert(overrides.end(), sets.begin(), sets.end());
  return config::load_config(file, overrides);
}

}  // namespace

TEST_CASE("an srun task's environment gives node id, count, coordinator, host and run dir",
          "[cluster_env]") {
  const auto detected = detect(slurm_task());
  CHECK(detected.engine == "slurm");
  CHECK(detected.job == "4242");
  CHECK(detected.local_rank == 1);
  const auto values = values_of(detected);
  CHECK(values.at("cluster.node_id") == "3");
  CHECK(values.at("cluster.nodes") == "4");
  // The step's first host (not the job's), port 20000 + 4242 % 10000.
  CHECK(values.at("cluster.coordinator") == "\"gpu01:24242\"");
  CHECK(values.at("cluster.advertise_host") == "\"gpu02\"");
  CHECK(values.at("train.run_dir") == "\"runs/slurm-4242\"");
  const std::string report = env::describe(detected);
  CHECK_THAT(report, Contains("started by Slurm (job 4242)"));
  CHECK_THAT(report, Contains("cluster.node_id = 3  <- SLURM_PROCID=3"));
  CHECK_THAT(report, Contains("cluster.coordinator = \"gpu01:24242\"  <- first host of "
                              "SLURM_STEP_NODELIST=gpu[01-02], port 20000 + SLURM_JOB_ID % 10000"));
  CHECK_THAT(report, Contains("local rank 1"));
}

TEST_CASE("the job's node list, SLURM_NODEID and DSEEK_COORDINATOR_PORT fill in", "[cluster_env]") {
  auto variables = slurm_task();
  variables.erase("SLURM_STEP_NODELIST");
  variables.erase("SLURMD_NODENAME");
  variables["DSEEK_COORDINATOR_PORT"] = "7555";
  const auto values = values_of(detect(variables));
  CHECK(values.at("cluster.coordinator") == "\"gpu01:7555\"");
  CHECK(values.at("cluster.advertise_host") == "\"gpu02\"");  // host 1 of gpu[01-02,07]
}

TEST_CASE("a Kubernetes pod's environment gives the same settings", "[cluster_env]") {
  auto detected = detect(kubernetes_pod());
  CHECK(detected.engine == "kubernetes");
  CHECK(detected.job == "trainer");
  auto values = values_of(detected);
  CHECK(values.at("cluster.node_id") == "2");
  CHECK(values.at("cluster.nodes") == "4");
  CHECK(values.at("cluster.coordinator") == "\"trainer-0.dseek:7420\"");
  CHECK(values.at("cluster.advertise_host") == "\"trainer-2\"");
  CHECK(values.at("train.run_dir") == "\"runs/trainer\"");
  // Pod 0 runs the coordinator and binds its own address; every pod advertises its IP.
  auto pod0 = kubernetes_pod();
  pod0["JOB_COMPLETION_INDEX"] = "0";
  pod0["HOSTNAME"] = "trainer-0";
  pod0["DSEEK_POD_IP"] = "10.1.2.3";
  pod0["DSEEK_COORDINATOR_PORT"] = "29400";
  values = values_of(detect(pod0));
  CHECK(values.at("cluster.coordinator") == "\"10.1.2.3:29400\"");
  CHECK(values.at("cluster.advertise_host") == "\"10.1.2.3\"");
  // A JobSet's pod names end the same way: <jobset>-<job>-<job index>-<pod index>.
  auto jobset = kubernetes_pod();
  jobset["HOSTNAME"] = "run7-nodes-0-2";
  CHECK(values_of(detect(jobset)).at("cluster.coordinator") == "\"run7-nodes-0-0.dseek:7420\"");
}

TEST_CASE("the incarnation comes from dseek launch or a restart count", "[cluster_env]") {
  auto variables = slurm_task();
  CHECK(detect(variables).incarnation == 0);
  variables["DSEEK_RESTART_COUNT"] = "2";
  auto detected = detect(variables);
  CHECK(detected.incarnation == 2);
  CHECK_THAT(env::describe(detected), Contains("incarnation 2 <- DSEEK_RESTART_COUNT=2"));
  variables["DSEEK_LAUNCH_RESTART"] = "1";  // dseek launch's own wins
  CHECK(detect(variables).incarnation == 1);
  auto pod = kubernetes_pod();
  pod["DSEEK_RESTART_COUNT"] = "";  // the failure-count annotation is not there yet
  CHECK(detect(pod).incarnation == 0);
}

TEST_CASE("no engine, DSEEK_CLUSTER_ENV=none and a batch script outside srun take nothing",
          "[cluster_env]") {
  CHECK(detect({}).engine.empty());
  CHECK(detect({}).settings.empty());
  CHECK(env::describe(detect({})).empty());
  auto variables = slurm_task();
  variables["DSEEK_CLUSTER_ENV"] = "none";
  CHECK(detect(variables).settings.empty());
  auto batch = slurm_task();
  batch.erase("SLURM_STEP_ID");
  const auto detected = detect(batch);
  CHECK(detected.settings.empty());
  CHECK_THAT(env::describe(detected), Contains("not an srun step (SLURM_STEP_ID is not set)"));
  // Forcing one engine reads it even when another's variables are there too.
  auto both = slurm_task();
  for (const auto& [name, value] : kubernetes_pod()) both[name] = value;
  both["DSEEK_CLUSTER_ENV"] = "kubernetes";
  CHECK(detect(both).engine == "kubernetes");
}

TEST_CASE("malformed variables are errors naming the variable", "[cluster_env]") {
  auto bad = [](const std::string& name, const std::string& value) {
    auto variables = slurm_task();
    variables[name] = value;
    return error_of(variables);
  };
  CHECK_THAT(bad("SLURM_STEP_NODELIST", "gpu[01-04"),
             Contains("SLURM_STEP_NODELIST=gpu[01-04: not a Slurm host list") &&
                 Contains("'[' without ']'"));
  CHECK_THAT(bad("SLURM_STEP_NODELIST", "gpu[04-01]"), Contains("SLURM_STEP_NODELIST="));
  CHECK_THAT(bad("SLURM_PROCID", "x1"), Contains("SLURM_PROCID=x1: expected a non-negative integer"));
  CHECK_THAT(bad("SLURM_NTASKS", "-2"), Contains("SLURM_NTASKS=-2: expected a non-negative integer"));
  CHECK_THAT(bad("SLURM_PROCID", "4"), Contains("SLURM_PROCID=4: expected less than SLURM_NTASKS=4"));
  CHECK_THAT(bad("DSEEK_COORDINATOR_PORT", "70000"),
             Contains("DSEEK_COORDINATOR_PORT=70000: expected a port in 1..65535"));
  CHECK_THAT(bad("DSEEK_CLUSTER_ENV", "pbs"), Contains("DSEEK_CLUSTER_ENV=pbs"));
  auto no_list = slurm_task();
  no_list.erase("SLURM_STEP_NODELIST");
  no_list.erase("SLURM_JOB_NODELIST");
  CHECK_THAT(error_of(no_list), Contains("SLURM_STEP_NODELIST and SLURM_JOB_NODELIST"));
  auto pod = kubernetes_pod();
  pod.erase("DSEEK_NODES");
  CHECK_THAT(error_of(pod), Contains("DSEEK_NODES: not set"));
  pod = kubernetes_pod();
  pod["HOSTNAME"] = "trainer-5";
  CHECK_THAT(error_of(pod), Contains("HOSTNAME=trainer-5: expected the pod name <job>-2"));
  pod = kubernetes_pod();
  pod["JOB_COMPLETION_INDEX"] = "4";
  CHECK_THAT(error_of(pod), Contains("JOB_COMPLETION_INDEX=4: expected less than DSEEK_NODES=4"));
}

TEST_CASE("keys the config file or --set gives win over the environment, and the report says so",
          "[cluster_env]") {
  auto detected = detect(slurm_task());
  const auto job = node_config(detected, "[cluster]\nnodes = 4\nadvertise_host = \"10.0.0.2\"\n",
                               {"cluster.coordinator=\"head:7000\""});
  CHECK(job.cluster.node_id == 3);                    // from SLURM_PROCID
  CHECK(job.cluster.advertise_host == "10.0.0.2");    // the file's
  CHECK(job.cluster.coordinator == "head:7000");      // --set's
  CHECK(job.train.run_dir == "runs/slurm-4242");      // from SLURM_JOB_ID
  const std::string report = env::describe(detected);
  CHECK_THAT(report, Contains("cluster.coordinator = \"gpu01:24242\"  <- first host of") &&
                         Contains("[not taken: the config or --set sets cluster.coordinator]"));
  CHECK_THAT(report, Contains("cluster.advertise_host = \"gpu02\"  <- SLURMD_NODENAME=gpu02  "
                              "[not taken: the config or --set sets cluster.advertise_host]"));
  CHECK_THAT(report, Contains("cluster.node_id = 3  <- SLURM_PROCID=3\n"));

  // --node-id is a --set of cluster.node_id; the file's run_dir wins too.
  auto again = detect(slurm_task());
  const auto other = node_config(again, "[train]\nrun_dir = \"runs/mine\"\n", {"cluster.node_id=1"});
  CHECK(other.cluster.node_id == 1);
  CHECK(other.cluster.nodes == 4);
  // (a file's relative path is read against the file's folder: the scratch directory)
  CHECK(std::filesystem::path(other.train.run_dir).filename() == "mine");
  CHECK(std::filesystem::path(other.train.run_dir).is_absolute());
}

TEST_CASE("a coordinator taken from the environment is node 0's", "[cluster_env]") {
  auto detected = detect(slurm_task());
  env::overrides_for(detected, {});
  CHECK_NOTHROW(env::check_coordinator_node(detected, 0));
  CHECK_THROWS_WITH(env::check_coordinator_node(detected, 2),
                    Contains("cluster.coordinator_node = 2") && Contains("set cluster.coordinator"));
  env::overrides_for(detected, {"cluster.coordinator"});
  CHECK_NOTHROW(env::check_coordinator_node(detected, 2));
}

TEST_CASE("a Slurm task's devices are its block of the host's GPUs unless Slurm bound them",
          "[cluster_env]") {
  const auto task = detect(slurm_task());  // local rank 1
  CHECK(env::visible_devices(task, 1, env::fixed_environment({})) == "1");
  CHECK(env::visible_devices(task, 4, env::fixed_environment({})) == "4,5,6,7");
  CHECK_FALSE(env::visible_devices(task, 1, env::fixed_environment({{"CUDA_VISIBLE_DEVICES", "0"}})));
  CHECK_FALSE(env::visible_devices(detect(kubernetes_pod()), 1, env::fixed_environment({})));
}

TEST_CASE("keys_set_by lists the keys of the file and the overrides", "[cluster_env]") {
  dseek::testing::ScratchDir dir("cluster-env-keys");
  std::ofstream(dir / "a.toml") << "[cluster]\nnodes = 2\n[train]\nsteps = 3\n[[faults]]\nkind = \"kill\"\n";
  CHECK(config::keys_set_by(dir / "a.toml", {" cluster.node_id = 1"}) ==
        std::set<std::string>{"cluster.nodes", "train.steps", "faults", "cluster.node_id"});
  CHECK(config::keys_set_by(dir / "missing.toml", {"x.y=1"}) == std::set<std::string>{"x.y"});
}

TEST_CASE("every variable the Kubernetes manifests set is one dseek-node reads", "[cluster_env]") {
  // An env entry is "- name: NAME" with NAME in capitals (containers, ports and volumes
  // have lower-case names); tests/deploy/test_deploy.py checks the same through YAML.
  const std::regex entry(R"(^\s*- name: ([A-Z_][A-Z0-9_]*)\s*$)");
  std::set<std::string> found;
  for (const auto& file :
       std::filesystem::directory_iterator(dseek::testing::source_dir() / "deploy/k8s")) {
    std::ifstream in(file.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch match;
      if (!std::regex_match(line, match, entry)) continue;
      INFO(file.path().filename().string() << ": " << line);
      found.insert(match[1]);
      const auto& read = env::variables();
      CHECK(std::find(read.begin(), read.end(), match[1].str()) != read.end());
    }
  }
  for (const char* expected : {"DSEEK_NODES", "DSEEK_HEADLESS_SERVICE", "DSEEK_POD_IP",
                               "DSEEK_RESTART_COUNT", "DSEEK_CLUSTER_SECRET"})
    CHECK(found.count(expected) == 1);
}
