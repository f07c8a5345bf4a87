// What the job engine that started this node says about it: Slurm (an `srun` step) or
// Kubernetes (a pod of an Indexed Job or JobSet behind a headless Service), read from the
// environment into config settings. dseek-node applies them under the user's: a key the
// config file or a --set (--node-id, --coordinator, --run-dir) sets wins, and what was
// taken, and what was kept, is printed at start.
//
//   setting                 Slurm                                 Kubernetes
//   cluster.node_id         SLURM_PROCID                          JOB_COMPLETION_INDEX
//   cluster.nodes           SLURM_NTASKS                          DSEEK_NODES (= parallelism)
//   cluster.coordinator     first host of SLURM_STEP_NODELIST     <job>-0.<DSEEK_HEADLESS_SERVICE>
//                           (else SLURM_JOB_NODELIST) : port      (node 0: DSEEK_POD_IP) : port
//                           20000 + SLURM_JOB_ID % 10000
//   cluster.advertise_host  SLURMD_NODENAME (else the list's      DSEEK_POD_IP (else HOSTNAME)
//                           host SLURM_NODEID)
//   train.run_dir           runs/slurm-<SLURM_JOB_ID>             runs/<job>
//   local rank              SLURM_LOCALID                         0
//   incarnation             DSEEK_LAUNCH_RESTART, else DSEEK_RESTART_COUNT (a restart loop, the
//                           Job's index failure count); 0 when unset
//
// <job> is HOSTNAME (the pod's name, "<job>-<index>") without "-<index>". The port is
// DSEEK_COORDINATOR_PORT when that is set (Kubernetes default: 7420). DSEEK_CLUSTER_ENV =
// auto (default) | slurm | kubernetes | none picks the engine (`dseek launch` gives its
// nodes none). Malformed values are errors naming the variable.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace dseek::cluster_env {

struct ClusterEnvError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Looks a variable up; nullopt when it is not set.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
Environment process_environment();  // getenv; HOSTNAME falls back to gethostname()
Environment fixed_environment(std::map<std::string, std::string> variables);  // for tests

// One config setting the environment gives.
struct Setting {
  std::string key;     // "cluster.node_id"
  std::string value;   // as a --set value: 1, "gpu01:20012"
  std::string source;  // the variables it came from: "SLURM_PROCID=1"
  bool kept = false;   // the user set the key: theirs wins, this one is not applied
};

struct Detected {
  std::string engine;  // "slurm", "kubernetes"; "" = neither
  std::string job;     // Slurm job id, Kubernetes job name
  std::vector<Setting> settings;
  int64_t local_rank = 0;        // this node's index among the job's nodes on its host
  int64_t incarnation = 0;       // how many times this node id was restarted
  std::string incarnation_source;
  std::string note;              // why the environment was not used, when it was not
};

// Reads the environment. Throws ClusterEnvError naming the variable that is wrong.
Detected detect(const Environment& env);

// Marks the settings whose key is in `user_keys` as kept and returns the others as
// "section.key=value" overrides, to go before the user's own.
std::vector<std::string> overrides_for(Detected& detected, const std::set<std::string>& user_keys);

// What was taken and what was kept, one line each, for the start of the node's log.
std::string describe(const Detected& detected);

// The coordinator address the environment gives is node 0's: a job whose
// cluster.coordinator_node is another node must set cluster.coordinator itself.
// Throws ClusterEnvError when it did not.
void check_coordinator_node(const Detected& detected, int64_t coordinator_node);

// CUDA_VISIBLE_DEVICES for this node, when the engine gave a local rank (Slurm) and the
// variable is unset (Slurm's GPU binding sets it): the node's block of devices, local
// rank x G .. local rank x G + G - 1, so that one task per GPU gets its own. nullopt: leave
// it as it is.
std::optional<std::string> visible_devices(const Detected& detected, int64_t gpus_per_node,
                                           const Environment& env);

// Every variable detect() and visible_devices() read, with DSEEK_CLUSTER_SECRET (read by
// the node itself): a manifest that sets any other is wrong (tests check it).
const std::vector<std::string>& variables();

}  // namespace dseek::cluster_env
