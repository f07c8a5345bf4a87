// dseek on a real Slurm (label: slurm; tests/slurm/slurm_cluster.hpp starts the daemons).
// One test case per cluster, each well under a minute:
//  - `srun --ntasks=2 dseek-node --config job.toml`: the tasks take node id, node count,
//    coordinator (localhost, port 20000 + job id % 10000) and run directory
//    (runs/slurm-<job id>) from Slurm, print it, and end with the same params_sha256 as
//    `dseek launch --nodes 2` of the same job;
//  - `sbatch deploy/slurm/train.sbatch` of the same job, one task killed with SIGKILL at
//    step 15: restart-node.sh restarts it, it rejoins, and the job ends with the
//    fault-free parameters;
//  - the same with both tasks killed and no task restarts: the step fails, the script
//    requeues the job, which resumes from its newest checkpoint and ends with the
//    fault-free parameters (Slurm holds a requeued job 2 minutes: the test starts it now);
//  - the host list expansion against `scontrol show hostnames`, and train.sbatch's checks
//    of the secret file and the config (no daemon needed).
// The coordinator's port is picked free, and the cluster's first job id made to match.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cluster_env/slurm_hostlist.hpp"
#include "slurm_cluster.hpp"
#include "spawned_process.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

constexpr int kSteps = 60;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The tiny job of the integration tests as a file of its own, without train.run_dir or
// any cluster key: those come from Slurm (or from dseek launch).
fs::path write_job(const fs::path& dir) {
  const fs::path file = dir / "job.toml";
  std::ofstream(file) << "[model]\ndim = 64\nlayers = 2\nheads = 4\ncontext = 64\nvocab = 256\n"
                      << "[train]\nbatch_size = 12\nsteps = " << kSteps
                      << "\nwarmup_steps = 5\neval_every = " << kSteps << "\nthreads = 1\n"
                      << "[data]\ndir = \"" << prepared_text().string() << "\"\n"
                      << "[metrics]\nprogress = \"plain\"\n";
  return file;
}

// params_sha256 of `dseek launch --nodes 2` of the job.
std::string launch_reference(const fs::path& job, const fs::path& run) {
  const auto start = std::chrono::steady_clock::now();
  const auto result = run_process({bin("dseek"), "launch", "--nodes", "2", "--run-dir",
                                   run.string(), job.string()},
                                  120s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const auto done = node_events(run, 0, "train_done");
  REQUIRE(done.size() == 1);
  WARN("dseek launch --nodes 2: " << seconds_since(start) << " s, params_sha256 "
                                  << string_field(done[0], "params_sha256"));
  return string_field(done[0], "params_sha256");
}

// Every node of `run` finished all steps with `sha`.
void require_same_model(const fs::path& run, const std::string& sha) {
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node);
    const auto done = node_events(run, node, "train_done");
    REQUIRE(done.size() == 1);
    CHECK(number_field(done[0], "step") == kSteps);
    CHECK(string_field(done[0], "params_sha256") == sha);
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// The secret as docs/clusters.md makes it.
fs::path make_secret(const fs::path& dir) {
  const fs::path secret = dir / "secret";
  REQUIRE(run_process({"bash", "-c", "(umask 077; openssl rand -hex 32 > " + secret.string() + ")"},
                      10s).exit_code == 0);
  return secret;
}

// `sbatch --wait deploy/slurm/train.sbatch` of `job` on the one-node test cluster (both
// tasks on it, instead of the script's one per node), running in the background; its
// output and the job's go to work/sbatch.out and work/job.out. `args` go to the script
// (dseek-node's arguments), `env` to its environment.
dseek::test::SpawnedProcess start_sbatch(const SlurmCluster& cluster, const fs::path& work,
                                         const fs::path& job, const std::vector<std::string>& args,
                                         const std::vector<std::string>& env = {}) {
  std::vector<std::string> command = {"sbatch", "--wait", "--nodes=1", "--ntasks=2",
                                      "--ntasks-per-node=2", "--chdir=" + work.string(),
                                      "--output=" + (work / "job.out").string(),
                                      (source_dir() / "deploy/slurm/train.sbatch").string()};
  return dseek::test::SpawnedProcess::start(
      command + args, (work / "sbatch.out").string(),
      cluster.client_env() + env +
          std::vector<std::string>{"DSEEK_CLUSTER_ENV=auto",  // scripts/test.sh sets none
                                   "DSEEK_HOME=" + source_dir().string(),
                                   "DSEEK_BIN=" + (binary_dir() / "bin").string(),
                                   "DSEEK_CONFIG=" + job.string(),
                                   "DSEEK_SECRET_FILE=" + make_secret(work).string(),
                                   "DSEEK_RUN_ROOT=" + (work / "runs").string()});
}

std::string job_output(const fs::path& work) {
  std::string text;
  for (const auto& line : read_lines(work / "job.out")) text += line + "\n";
  for (const auto& line : read_lines(work / "sbatch.out")) text += line + "\n";
  return text;
}

// 30 ms more per step: a kill lands while the job runs (the parameters do not change).
const std::vector<std::string> kSlowSteps = {"--set", "faults=[{kind = \"slow\", ms = 30, step = 0}]"};

}  // namespace

TEST_CASE("srun --ntasks=2 dseek-node takes its nodes from Slurm and trains dseek launch's model",
          "[slurm]") {
  skip_unless_root();
  ScratchDir work("slurm-srun");
  const fs::path job = write_job(work.path());
  const std::string reference = launch_reference(job, work / "launched");

  const int port = free_port_between(20001, 29999);
  const int job_id = port - 20000;  // its port: 20000 + job id % 10000
  auto start = std::chrono::steady_clock::now();
  SlurmCluster cluster(job_id);
  WARN("Slurm daemons up in " << seconds_since(start) << " s");
  start = std::chrono::steady_clock::now();
  const auto srun = run_process({"srun", "--ntasks=2", "--chdir=" + work.path().string(),
                                 "--kill-on-bad-exit=1", bin("dseek-node"), "--config",
                                 job.string()},
                                120s, cluster.client_env() + std::vector<std::string>{
                                                                 "DSEEK_CLUSTER_SECRET=slurm-test", "DSEEK_CLUSTER_ENV=auto"});
  INFO(srun.output << cluster.logs());
  REQUIRE(srun.exit_code == 0);
  WARN("srun --ntasks=2 dseek-node: " << seconds_since(start) << " s");
  const std::string id = std::to_string(job_id);
  std::string report;  // what the tasks printed they took from Slurm
  for (const auto& line : lines_of(srun.output))
    if (line.rfind("dseek-node: ", 0) == 0) report += line + "\n";
  WARN(report);
  CHECK_THAT(srun.output, Contains("dseek-node: started by Slurm (job " + id + ")"));
  CHECK_THAT(srun.output, Contains("cluster.node_id = 0  <- SLURM_PROCID=0"));
  CHECK_THAT(srun.output, Contains("cluster.node_id = 1  <- SLURM_PROCID=1"));
  CHECK_THAT(srun.output, Contains("cluster.nodes = 2  <- SLURM_NTASKS=2"));
  CHECK_THAT(srun.output, Contains("cluster.coordinator = \"localhost:" + std::to_string(port) +
                                   "\"  <- first host of SLURM_STEP_NODELIST=localhost, port "
                                   "20000 + SLURM_JOB_ID % 10000"));
  CHECK_THAT(srun.output, Contains("cluster.advertise_host = \"localhost\"  <- SLURMD_NODENAME=localhost"));
  CHECK_THAT(srun.output, Contains("train.run_dir = \"runs/slurm-" + id + "\"  <- SLURM_JOB_ID=" + id));
  const fs::path run = work / ("runs/slurm-" + id);
  require_same_model(run, reference);
  const auto started = node_events(run, 1, "node_started");
  REQUIRE(started.size() == 1);
  CHECK(string_field(started[0], "coordinator") == "localhost:" + std::to_string(port));
  WARN("srun job " << id << ": both tasks ended with params_sha256 " << reference
                   << ", as dseek launch --nodes 2");
  require_no_node_left(run, 2);
}

TEST_CASE("train.sbatch: a task killed with SIGKILL is restarted, rejoins, and the job ends "
          "with the fault-free model", "[slurm][faults]") {
  skip_unless_root();
  ScratchDir work("slurm-sbatch");
  const fs::path job = write_job(work.path());
  const std::string reference = launch_reference(job, work / "launched");

  const int port = free_port_between(20001, 29999);
  const int job_id = port - 20000;
  SlurmCluster cluster(job_id);
  const fs::path run = work / ("runs/slurm-" + std::to_string(job_id));
  const auto start = std::chrono::steady_clock::now();
  auto sbatch = start_sbatch(cluster, work.path(), job, kSlowSteps);
  const auto step15 = wait_for_event(run, 1, "step", 60s, [](const std::string& line) {
    return number_field(line, "step") >= 15;
  });
  INFO(job_output(work.path()) << cluster.logs());
  REQUIRE_FALSE(step15.empty());
  const auto first = node_pids(run, 1);
  REQUIRE(first.size() == 1);
  REQUIRE(::kill(first[0], SIGKILL) == 0);
  const auto exit_code = sbatch.wait_for(120s);
  INFO(job_output(work.path()));
  REQUIRE(exit_code);
  CHECK(*exit_code == 0);
  WARN("sbatch train.sbatch, task 1 killed at step " << number_field(step15, "step") << ": "
                                                     << seconds_since(start) << " s");
  const std::string output = job_output(work.path());
  CHECK_THAT(output, Contains("restart-node: task 1: dseek-node exited with status 137; "
                              "restarting (1/3)"));
  CHECK_THAT(output, Contains("dseek-node: restarted node, incarnation 1 <- DSEEK_RESTART_COUNT=1"));
  // train.sbatch passes --run-dir: Slurm's run directory is not taken, and the node says so.
  CHECK_THAT(output, Contains("<- SLURM_JOB_ID=" + std::to_string(job_id) +
                              "  [not taken: the config or --set sets train.run_dir]"));
  // Node 1's second incarnation rejoined; node 0 saw it lost and both recovered.
  const auto started = node_events(run, 1, "node_started");
  REQUIRE(started.size() == 2);
  CHECK(number_field(started[1], "incarnation") == 1);
  CHECK(number_field(started[1], "pid") != first[0]);
  CHECK_FALSE(event_with(run, 0, "node_lost", "lost_node", 1).empty());
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node);
    const auto recovered = node_events(run, node, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(number_field(recovered[0], "world_size") == 2);
    WARN("node " << node << " recovered from step " << number_field(recovered[0], "from_step")
                 << " (" << string_field(recovered[0], "source") << ") in "
                 << number_field(recovered[0], "recovery_ms") << " ms");
  }
  require_same_model(run, reference);
  WARN("sbatch job " << job_id << ": both tasks ended with params_sha256 " << reference
                     << ", as the fault-free dseek launch --nodes 2");
  require_no_node_left(run, 2);
}

TEST_CASE("the host list expansion agrees with scontrol show hostnames", "[slurm][cluster_env]") {
  ScratchDir dir("slurm-hostlist");
  const auto env = std::vector<std::string>{"SLURM_CONF=" + write_minimal_slurm_conf(dir.path()).string()};
  for (const std::string list :
       {"localhost", "gpu[01-04,07]", "rack[1-2]-node[01-02]", "n[1-3],m[08-11],x", "n[009-011]",
        "n[08-010]", "n[01-2]", "n[1-02]", "n[9-11]", "n[0-1]-[2-3]", "n[1-2]x[3]", "x,,y",
        "n[00-01,5]", "a1[2-3]", "host-01", "n[1-2] m"}) {
    INFO(list);
    const auto slurm = run_process({"scontrol", "show", "hostnames", list}, 10s, env);
    REQUIRE(slurm.exit_code == 0);
    CHECK(dseek::cluster_env::expand_hostlist(list) == lines_of(slurm.output));
  }
  for (const std::string list : {"a[1-2]b", "n[3-1]", "n[1,,2]", "n[a-b]", "n[]", "n[-1]",
                                 "n[[1]]", "n[1-3]y,z[4-5]"}) {
    INFO(list);
    const auto slurm = run_process({"scontrol", "show", "hostnames", list}, 10s, env);
    CHECK((slurm.exit_code != 0 || slurm.output.find("Invalid") != std::string::npos));
    CHECK_THROWS_AS(dseek::cluster_env::expand_hostlist(list), dseek::cluster_env::HostlistError);
  }
}

TEST_CASE("train.sbatch refuses a secret file others can read, and a config that does not load",
          "[slurm]") {
  // The script's checks come before srun: run it as the batch step would, without Slurm.
  ScratchDir work("slurm-sbatch-checks");
  const fs::path secret = work / "secret";
  std::ofstream(secret) << "x\n";
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const std::vector<std::string> env = {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=localhost",
                                        "DSEEK_HOME=" + source_dir().string(),
                                        "DSEEK_BIN=" + (binary_dir() / "bin").string(),
                                        "DSEEK_SECRET_FILE=" + secret.string(),
                                        "DSEEK_RUN_ROOT=" + (work / "runs").string()};
  const std::string script = (source_dir() / "deploy/slurm/train.sbatch").string();
  auto result = run_process({"bash", script}, 30s, env);
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Contains("must be yours and readable by you only (chmod 600)"));
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
  result = run_process({"bash", script, "--set", "train.steps=-1"}, 30s, env);
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Contains("train.steps"));
  CHECK_FALSE(fs::exists(work / "runs"));  // nothing started
}

TEST_CASE("train.sbatch: a failed step requeues the job, which resumes from its newest "
          "checkpoint and ends with the fault-free model", "[slurm][faults]") {
  skip_unless_root();
  ScratchDir work("slurm-requeue");
  const fs::path job = write_job(work.path());
  const std::string reference = launch_reference(job, work / "launched");
  const int port = free_port_between(20001, 29999);
  const int job_id = port - 20000;
  SlurmCluster cluster(job_id);
  const fs::path run = work / ("runs/slurm-" + std::to_string(job_id));
  const auto start = std::chrono::steady_clock::now();
  // No task restarts: both killed, the step fails and the script requeues the job.
  auto sbatch = start_sbatch(cluster, work.path(), job,
                             kSlowSteps + std::vector<std::string>{"--set", "checkpoint.every_steps=10",
                                                                   "--set", "checkpoint.async=false"},
                             {"DSEEK_MAX_RESTARTS=0"});
  const auto committed = wait_for_event(run, 0, "checkpoint_committed", 60s, [](const std::string& line) {
    return number_field(line, "step") >= 20;
  });
  INFO(job_output(work.path()) << cluster.logs());
  REQUIRE_FALSE(committed.empty());
  const int checkpoint_step = static_cast<int>(number_field(committed, "step"));
  for (int node = 0; node < 2; ++node) {
    const auto pids = node_pids(run, node);
    REQUIRE(pids.size() == 1);
    ::kill(pids[0], SIGKILL);
  }
  // Slurm holds a requeued job for 2 minutes (PENDING, Reason=BeginTime): start it now.
  // Only once it is pending: while the requeue completes, Slurm sets the hold again.
  const std::string id = std::to_string(job_id);
  const auto env = cluster.client_env();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::string state;
  int updates = 0;
  while (state.rfind("RUNNING", 0) != 0 && state.rfind("COMPLETED", 0) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
    state = run_process({"squeue", "-h", "--states=all", "-j", id, "-o", "%T %r"}, 10s, env).output;
    state.erase(state.find_last_not_of(" \n") + 1);
    if (state == "PENDING BeginTime") {
      REQUIRE(run_process({"scontrol", "update", "JobId=" + id, "StartTime=now"}, 10s, env)
                  .exit_code == 0);
      ++updates;
    }
  }
  INFO(job_output(work.path()) << cluster.logs());
  CHECK(updates >= 1);
  REQUIRE(state.rfind("PENDING", 0) != 0);
  // The requeued run trains to the end, and the job ends.
  CHECK_FALSE(wait_for_event(run, 0, "train_done", 90s).empty());
  REQUIRE(cluster.wait_until_idle(60s));
  // sbatch --wait polls at growing intervals: it may not have noticed yet (not needed).
  const auto sbatch_exit = sbatch.wait_for(1s);
  const auto first = node_events(run, 0, "node_started");
  REQUIRE(first.size() == 2);
  WARN("sbatch train.sbatch, both tasks killed after the checkpoint of step "
       << checkpoint_step << ", requeued: " << seconds_since(start) << " s; the requeued run "
       << "started " << number_field(first[1], "ts") - number_field(first[0], "ts")
       << " s after the first (scontrol update StartTime=now " << updates
       << " time(s)); sbatch --wait exited with "
       << (sbatch_exit ? std::to_string(*sbatch_exit) : std::string("nothing yet")));
  const std::string output = job_output(work.path());
  CHECK_THAT(output, Contains("train.sbatch: the step failed (status"));
  CHECK_THAT(output, Contains("; requeueing job " + std::to_string(job_id)));
  CHECK_THAT(output, Contains("train.sbatch: job " + std::to_string(job_id) + " (restart 1)"));
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node);
    CHECK(node_events(run, node, "node_started").size() == 2);  // the first run, the requeued one
    const auto resumed = node_events(run, node, "resumed");
    REQUIRE(resumed.size() == 1);
    CHECK(number_field(resumed[0], "step") >= checkpoint_step);
  }
  require_same_model(run, reference);
  WARN("requeued job " << job_id << " resumed from step "
                       << number_field(node_events(run, 0, "resumed")[0], "step")
                       << " and ended with params_sha256 " << reference << ", as the fault-free run");
  require_no_node_left(run, 2);
}
