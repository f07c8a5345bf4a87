// Implementation of cluster_env.hpp.
#include "runtime/cluster_env/cluster_env.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "runtime/cluster_env/slurm_hostlist.hpp"

namespace dseek::cluster_env {

namespace {

constexpr int64_t kSlurmPortBase = 20000;  // below Linux's ephemeral ports (32768-60999)
constexpr int64_t kSlurmPortSpan = 10000;
constexpr int64_t kKubernetesPort = 7420;  // cluster.coordinator's default port

[[noreturn]] void fail(const std::string& message) { throw ClusterEnvError(message); }

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Reader {
  const Environment& env;

  std::optional<std::string> get(const std::string& name) const {
    auto value = env(name);
    if (value && value->empty()) return std::nullopt;  // set to "" is unset
    return value;
  }
  std::string need(const std::string& name, const std::string& why) const {
    auto value = get(name);
    if (!value) fail(name + ": not set; " + why);
    return *value;
  }
  // A non-negative integer; `name` is named in the error.
  int64_t integer(const std::string& name, const std::string& text) const {
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0 || value < 0 ||
        text.find_first_not_of("0123456789") != std::string::npos)
      fail(name + "=" + text + ": expected a non-negative integer");
    return value;
  }
  int64_t port(int64_t fallback, const std::string& fallback_source, std::string& source) const {
    if (auto text = get("DSEEK_COORDINATOR_PORT")) {
      const int64_t port = integer("DSEEK_COORDINATOR_PORT", *text);
      if (port < 1 || port > 65535)
        fail("DSEEK_COORDINATOR_PORT=" + *text + ": expected a port in 1..65535");
      source = "DSEEK_COORDINATOR_PORT=" + *text;
      return port;
    }
    source = fallback_source;
    return fallback;
  }
};

void read_incarnation(const Reader& in, Detected& out) {
  for (const char* name : {"DSEEK_LAUNCH_RESTART", "DSEEK_RESTART_COUNT"}) {
    if (auto text = in.get(name)) {
      out.incarnation = in.integer(name, *text);
      out.incarnation_source = std::string(name) + "=" + *text;
      return;
    }
  }
}

void read_slurm(const Reader& in, Detected& out) {
  const std::string job = in.need("SLURM_JOB_ID", "not a Slurm job");
  const int64_t job_id = in.integer("SLURM_JOB_ID", job);
  out.job = job;
  if (!in.get("SLURM_STEP_ID") && !in.get("SLURM_STEPID")) {
    out.note = "Slurm job " + job + " but not an srun step (SLURM_STEP_ID is not set): start "
               "dseek-node with srun to take the node id and count from Slurm";
    return;
  }
  out.engine = "slurm";
  const std::string procid = in.need("SLURM_PROCID", "srun sets it for every task");
  const std::string ntasks = in.need("SLURM_NTASKS", "srun sets it for every task");
  const int64_t node_id = in.integer("SLURM_PROCID", procid);
  const int64_t nodes = in.integer("SLURM_NTASKS", ntasks);
  if (nodes < 1) fail("SLURM_NTASKS=" + ntasks + ": expected at least 1");
  if (node_id >= nodes)
    fail("SLURM_PROCID=" + procid + ": expected less than SLURM_NTASKS=" + ntasks);

  std::string list_name = "SLURM_STEP_NODELIST";
  auto list = in.get(list_name);
  if (!list) {
    list_name = "SLURM_JOB_NODELIST";
    list = in.get(list_name);
  }
  if (!list) fail("SLURM_STEP_NODELIST and SLURM_JOB_NODELIST: neither is set; srun sets them");
  std::vector<std::string> hosts;
  try {
    hosts = expand_hostlist(*list);
  } catch (const HostlistError& error) {
    fail(list_name + "=" + *list + ": not a Slurm host list: " + error.what());
  }
  std::string port_source;
  const int64_t port = in.port(kSlurmPortBase + job_id % kSlurmPortSpan,
                               "port 20000 + SLURM_JOB_ID % 10000", port_source);

  std::string advertise, advertise_source;
  if (auto name = in.get("SLURMD_NODENAME")) {
    advertise = *name;
    advertise_source = "SLURMD_NODENAME=" + *name;
  } else if (auto index = in.get("SLURM_NODEID")) {
    const int64_t node_index = in.integer("SLURM_NODEID", *index);
    if (node_index >= static_cast<int64_t>(hosts.size()))
      fail("SLURM_NODEID=" + *index + ": expected less than the " +
           std::to_string(hosts.size()) + " hosts of " + list_name);
    advertise = hosts[static_cast<size_t>(node_index)];
    advertise_source = "host SLURM_NODEID=" + *index + " of " + list_name;
  }
  if (auto local = in.get("SLURM_LOCALID")) out.local_rank = in.integer("SLURM_LOCALID", *local);

  out.settings.push_back({"cluster.node_id", procid, "SLURM_PROCID=" + procid});
  out.settings.push_back({"cluster.nodes", ntasks, "SLURM_NTASKS=" + ntasks});
  out.settings.push_back({"cluster.coordinator", quoted(hosts[0] + ":" + std::to_string(port)),
                          "first host of " + list_name + "=" + *list + ", " + port_source});
  if (!advertise.empty())
    out.settings.push_back({"cluster.advertise_host", quoted(advertise), advertise_source});
  out.settings.push_back({"train.run_dir", quoted("runs/slurm-" + job), "SLURM_JOB_ID=" + job});
}

void read_kubernetes(const Reader& in, Detected& out) {
  out.engine = "kubernetes";
  const std::string index = in.need("JOB_COMPLETION_INDEX", "an Indexed Job sets it");
  const int64_t node_id = in.integer("JOB_COMPLETION_INDEX", index);
  const std::string nodes_text =
      in.need("DSEEK_NODES", "the manifest gives the node count (the Job's parallelism)");
  const int64_t nodes = in.integer("DSEEK_NODES", nodes_text);
  if (nodes < 1) fail("DSEEK_NODES=" + nodes_text + ": expected at least 1");
  if (node_id >= nodes)
    fail("JOB_COMPLETION_INDEX=" + index + ": expected less than DSEEK_NODES=" + nodes_text);
  const std::string service = in.need(
      "DSEEK_HEADLESS_SERVICE", "the manifest names the headless Service of the pods");
  const std::string hostname = in.need("HOSTNAME", "the pod's name, <job>-<index>");
  const std::string suffix = "-" + index;
  if (hostname.size() <= suffix.size() ||
      hostname.compare(hostname.size() - suffix.size(), suffix.size(), suffix) != 0)
    fail("HOSTNAME=" + hostname + ": expected the pod name <job>" + suffix +
         " of an Indexed Job with JOB_COMPLETION_INDEX=" + index);
  const std::string job = hostname.substr(0, hostname.size() - suffix.size());
  out.job = job;
  std::string port_source;
  const int64_t port = in.port(kKubernetesPort, "port 7420", port_source);
  const auto pod_ip = in.get("DSEEK_POD_IP");
  std::string coordinator, coordinator_source;
  if (node_id == 0 && pod_ip) {  // the coordinator binds its own address (no DNS wait)
    coordinator = *pod_ip;
    coordinator_source = "DSEEK_POD_IP=" + *pod_ip + " (this pod runs the coordinator)";
  } else {
    coordinator = job + "-0." + service;
    coordinator_source = "pod 0 of HOSTNAME=" + hostname + " behind DSEEK_HEADLESS_SERVICE=" + service;
  }
  out.settings.push_back({"cluster.node_id", index, "JOB_COMPLETION_INDEX=" + index});
  out.settings.push_back({"cluster.nodes", nodes_text, "DSEEK_NODES=" + nodes_text});
  out.settings.push_back({"cluster.coordinator", quoted(coordinator + ":" + std::to_string(port)),
                          coordinator_source + ", " + port_source});
  if (pod_ip)
    out.settings.push_back({"cluster.advertise_host", quoted(*pod_ip), "DSEEK_POD_IP=" + *pod_ip});
  else
    out.settings.push_back({"cluster.advertise_host", quoted(hostname), "HOSTNAME=" + hostname});
  out.settings.push_back({"train.run_dir", quoted("runs/" + job), "the job name of HOSTNAME"});
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    if (const char* value = std::getenv(name.c_str())) return std::string(value);
    if (name == "HOSTNAME") {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') return std::string(host);
    }
    return std::nullopt;
  };
}

Environment fixed_environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const std::string& name) -> std::optional<std::string> {
    auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  };
}

Detected detect(const Environment& env) {
  const Reader in{env};
  Detected out;
  read_incarnation(in, out);
  const std::string choice = in.get("DSEEK_CLUSTER_ENV").value_or("auto");
  if (choice == "none") return out;
  if (choice == "slurm") {
    read_slurm(in, out);
  } else if (choice == "kubernetes") {
    read_kubernetes(in, out);
  } else if (choice == "auto") {
    if (in.get("SLURM_JOB_ID")) read_slurm(in, out);
    else if (in.get("JOB_COMPLETION_INDEX")) read_kubernetes(in, out);
  } else {
    fail("DSEEK_CLUSTER_ENV=" + choice + ": expected auto, slurm, kubernetes or none");
  }
  return out;
}

std::vector<std::string> overrides_for(Detected& detected, const std::set<std::string>& user_keys) {
  std::vector<std::string> overrides;
  for (auto& setting : detected.settings) {
    setting.kept = user_keys.count(setting.key) > 0;
    if (!setting.kept) overrides.push_back(setting.key + "=" + setting.value);
  }
  return overrides;
}

std::string describe(const Detected& detected) {
  std::string out;
  if (!detected.note.empty()) out += "dseek-node: " + detected.note + "\n";
  if (!detected.engine.empty()) {
    out += "dseek-node: started by " +
           std::string(detected.engine == "slurm" ? "Slurm (job " : "Kubernetes (job ") +
           detected.job + "); from its environment:\n";
    for (const auto& setting : detected.settings) {
      out += "dseek-node:   " + setting.key + " = " + setting.value + "  <- " + setting.source;
      out += setting.kept ? "  [not taken: the config or --set sets " + setting.key + "]\n"
                          : "\n";
    }
    out += "dseek-node:   local rank " + std::to_string(detected.local_rank) + "\n";
  }
  if (!detected.incarnation_source.empty() && detected.incarnation > 0)
    out += "dseek-node: restarted node, incarnation " + std::to_string(detected.incarnation) +
           " <- " + detected.incarnation_source + "\n";
  return out;
}

void check_coordinator_node(const Detected& detected, int64_t coordinator_node) {
  if (coordinator_node == 0) return;
  for (const auto& setting : detected.settings)
    if (setting.key == "cluster.coordinator" && !setting.kept)
      fail("cluster.coordinator_node = " + std::to_string(coordinator_node) +
           ": the coordinator address taken from " + setting.source +
           " is node 0's; set cluster.coordinator to node " + std::to_string(coordinator_node) +
           "'s host:port");
}

std::optional<std::string> visible_devices(const Detected& detected, int64_t gpus_per_node,
                                           const Environment& env) {
  if (detected.engine != "slurm") return std::nullopt;
  if (auto set = env("CUDA_VISIBLE_DEVICES")) return std::nullopt;
  std::string devices;
  for (int64_t device = detected.local_rank * gpus_per_node;
       device < (detected.local_rank + 1) * gpus_per_node; ++device) {
    if (!devices.empty()) devices += ',';
    devices += std::to_string(device);
  }
  return devices;
}

const std::vector<std::string>& variables() {
  static const std::vector<std::string> names = {
      "DSEEK_CLUSTER_ENV", "DSEEK_CLUSTER_SECRET", "DSEEK_COORDINATOR_PORT",
      "DSEEK_LAUNCH_RESTART", "DSEEK_RESTART_COUNT",
      // Slurm
      "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_PROCID", "SLURM_NTASKS",
      "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
      "SLURMD_NODENAME", "CUDA_VISIBLE_DEVICES",
      // Kubernetes
      "JOB_COMPLETION_INDEX", "DSEEK_NODES", "DSEEK_HEADLESS_SERVICE", "DSEEK_POD_IP",
      "HOSTNAME"};
  return names;
}

}  // namespace dseek::cluster_env
