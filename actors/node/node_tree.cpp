// Implementation of node_tree.hpp.
#include "actors/node/node_tree.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>

#include "actors/cluster/coordinator.hpp"
#include "actors/cluster/node_agent.hpp"
#include "actors/faults/fault_actions.hpp"
#include "actors/faults/fault_injector.hpp"
#include "actors/node/checkpoint_writer.hpp"
#include "actors/node/data_prefetcher.hpp"
#include "actors/worker_group/gradient_shard.hpp"
#include "actors/node/health_monitor.hpp"
#include "actors/node/metrics_exporter.hpp"
#include "actors/node/node_registry.hpp"
#include "actors/worker_group/pipeline_stage.hpp"
#include "runtime/config/backup_coordinators.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/state/stage_memory.hpp"

namespace dseek::actors {

namespace {
using std::chrono::milliseconds;

// The worker group of local rank `local_rank` of `local_ranks`: its gradient_shards, a
// pipeline job's stage, and the worker. A crash in it restarts this group only (one_for_all
// within it); the node's other groups see it as a restarted worker of their node (a new
// epoch) and recover from memory, as every other rank does.
supervisor_config worker_group_config(const worker_setup& node_worker, int local_rank,
                                      int local_ranks) {
  const auto& config = node_worker.config;
  supervisor_config group;
  group.name = local_ranks == 1 ? "worker_group" : "worker_group_" + std::to_string(local_rank);
  group.strategy = restart_strategy::one_for_all;
  group.max_restarts = 3;
  group.restart_period = std::chrono::seconds(60);
  group.listener = node_worker.router;
  // The optimizer state: started before the worker, which finds them at its start, and
  // stopped after it (its final checkpoint reads their moments).
  const crash_requests crash = crash_requests_of(config);
  for (int index = 0; index < gradient_shard_count(config); ++index)
    group.children.push_back({"gradient_shard_" + std::to_string(index),
                              [index, local_rank, crash](caf::actor_system& sys) {
                                return spawn_gradient_shard(sys, index, local_rank, crash);
                              },
                              restart_policy::permanent, milliseconds(2000)});
  // A pipeline or tensor-parallel job's stage (its trainer, on a thread of its own):
  // started before the worker, which drives it, and stopped after it.
  if (config.parallel.pipeline > 1 || config.parallel.tensor > 1)
    group.children.push_back({"pipeline_stage",
                              [local_rank, crash](caf::actor_system& sys) {
                                return caf::actor_cast<caf::actor>(
                                    spawn_pipeline_stage(sys, local_rank, crash));
                              },
                              restart_policy::permanent, milliseconds(10000)});
  auto worker = node_worker;
  worker.local_rank = local_rank;
  if (local_rank > 0) {
    // Each group's own: its restarts, the state it recovers from, its run's events.
    worker.starts = std::make_shared<std::atomic<int>>(0);
    worker.stage_memory = std::make_shared<train::StageMemory>();
    // RUN_DIR/local-<r>/node-<id>/events.jsonl: local rank r's run as a run dir of its
    // own, beside the node's events.jsonl (local rank 0's run and the node's actors), which
    // keeps its one rank's run per node for its readers (node_runs.hpp, dseek report).
    worker.events = std::make_shared<metrics::EventLog>(
        worker.run_dir / ("local-" + std::to_string(local_rank)), config.cluster.node_id);
  }
  // The worker's orderly stop waits for the step in flight and the final checkpoint.
  group.children.push_back({"worker",
                            [worker](caf::actor_system& sys) { return spawn_worker(sys, worker); },
                            restart_policy::transient, milliseconds(120000)});
  return group;
}

}  // namespace

ClusterSettings cluster_settings_of(const config::ClusterConfig& cluster) {
  ClusterSettings s;
  s.secret = cluster.secret;
  s.heartbeat_interval = milliseconds(cluster.heartbeat_interval_ms);
  s.heartbeat_timeout = milliseconds(cluster.heartbeat_timeout_ms);
  s.join_retries = static_cast<std::uint32_t>(cluster.join_retries);
  s.join_retry_delay = milliseconds(cluster.join_retry_delay_ms);
  s.connect_timeout = milliseconds(cluster.connect_timeout_ms);
  return s;
}

namespace {

// The majority a coordinator needs when the job has backup coordinators (else 0: none).
std::int32_t quorum_of(const config::ClusterConfig& cluster) {
  if (config::parse_backup_coordinators(cluster.backup_coordinators).empty()) return 0;
  return static_cast<std::int32_t>(cluster.nodes / 2 + 1);
}

coordinator_config coordinator_config_of(const config::JobConfig& config,
                                         std::shared_ptr<const metrics::TraceRecorder> trace) {
  coordinator_config cc;
  cc.trace = std::move(trace);
  cc.settings = cluster_settings_of(config.cluster);
  cc.ranks_per_node = static_cast<std::int32_t>(config.cluster.gpus_per_node);
  cc.quorum = quorum_of(config.cluster);
  // A held join is answered (no_quorum) before the agent's request times out.
  cc.quorum_hold = std::chrono::milliseconds(std::max<int64_t>(1, config.cluster.connect_timeout_ms / 2));
  return cc;
}

}  // namespace

std::shared_ptr<CoordinatorSuccession> coordinator_succession_of(
    const config::JobConfig& config, std::shared_ptr<const metrics::TraceRecorder> trace) {
  const auto& cluster = config.cluster;
  const auto backups = config::parse_backup_coordinators(cluster.backup_coordinators);
  if (backups.empty()) return nullptr;
  std::vector<coordinator_candidate> candidates{{cluster.coordinator_node, cluster.coordinator, false}};
  for (const auto& backup : backups) candidates.push_back({backup.node_id, backup.address, true});
  const coordinator_config cc = coordinator_config_of(config, std::move(trace));
  const bool tls = !cluster.tls_ca.empty();
  auto host = [cc, tls](caf::actor_system& sys,
                        const coordinator_candidate& here) -> caf::expected<caf::actor> {
    const auto at = parse_host_port(here.address);  // checked by the config's validation
    if (!at) return caf::make_error(caf::sec::invalid_argument, "not host:port: " + here.address);
    auto coordinator = spawn_coordinator(sys, cc);
    if (!coordinator) return coordinator.error();
    auto bound = publish_coordinator(sys, *coordinator, at->port, at->host, tls);
    if (!bound) {
      caf::anon_send_exit(*coordinator, caf::exit_reason::kill);
      return bound.error();
    }
    log_line("dseek coordinator", "started here as the job's coordinator at %s (a failover; "
             "epochs need %d of the job's nodes)", here.address.c_str(), cc.quorum);
    return *coordinator;
  };
  CoordinatorSuccession::LocalPrimary local_primary;
  if (cluster.node_id == cluster.coordinator_node)
    local_primary = [](caf::actor_system& sys) { return names::lookup(sys, names::coordinator); };
  return std::make_shared<CoordinatorSuccession>(cluster.node_id, std::move(candidates),
                                                 std::move(host), std::move(local_primary));
}

supervisor_config node_supervisor_config(const node_tree_setup& setup) {
  const auto& config = setup.worker.config;
  supervisor_config node;
  node.name = "node_supervisor";
  node.strategy = restart_strategy::one_for_one;
  node.max_restarts = 5;
  node.restart_period = std::chrono::seconds(30);
  node.listener = setup.worker.router;

  auto events = setup.worker.events;
  auto endpoint = setup.metrics_endpoint;
  const crash_requests crash = crash_requests_of(config);
  node.children.push_back({"metrics_exporter",
                           [events, endpoint, crash](caf::actor_system& sys) {
                             return spawn_metrics_exporter(sys, events, endpoint, crash);
                           },
                           restart_policy::permanent, milliseconds(2000)});
  node.children.push_back({"health_monitor",
                           [crash](caf::actor_system& sys) {
                             return spawn_health_monitor(sys, {}, crash);
                           },
                           restart_policy::permanent, milliseconds(2000)});
  // Started before the worker group, so stopped after it: the worker's final
  // checkpoint is written before this actor is asked to stop. Its shutdown timeout
  // covers a write in flight on a slow disk.
  node.children.push_back({"checkpoint_writer",
                           [crash](caf::actor_system& sys) {
                             return spawn_checkpoint_writer(sys, crash);
                           },
                           restart_policy::permanent, milliseconds(60000)});

  // One per worker group: each keeps its own worker's slices ahead.
  const int64_t prefetch_depth = config.data.prefetch;
  const int local_ranks = static_cast<int>(config.cluster.gpus_per_node);
  for (int local_rank = 0; local_rank < local_ranks; ++local_rank)
    node.children.push_back({local_rank == 0 ? std::string("data_prefetcher")
                                             : "data_prefetcher_" + std::to_string(local_rank),
                             [prefetch_depth, local_rank, crash](caf::actor_system& sys) {
                               return spawn_data_prefetcher(sys, prefetch_depth, local_rank, crash);
                             },
                             restart_policy::permanent, milliseconds(2000)});

  node_agent_config agent;
  agent.node_id = config.cluster.node_id;
  agent.coordinator = setup.coordinator;
  agent.advertise_host = config.cluster.advertise_host;
  agent.settings = cluster_settings_of(config.cluster);
  agent.listener = setup.worker.router;
  agent.drop_heartbeats = setup.worker.fault_actions->drop_heartbeats();
  agent.tls = !config.cluster.tls_ca.empty();
  agent.measure_clock = true;  // the clock_offset event of the node's trace
  agent.succession = setup.succession;
  agent.crash = crash;
  agent.trace = setup.worker.trace;
  node.children.push_back({"membership",
                           [agent](caf::actor_system& sys) {
                             auto spawned = spawn_node_agent(sys, agent);
                             if (!spawned) throw std::runtime_error(sys.render(spawned.error()));
                             // The worker's thread reaches the coordinator through it.
                             names::register_handle(sys, names::membership, *spawned);
                             return *spawned;
                           },
                           restart_policy::permanent, milliseconds(2000)});

  auto plan = setup.worker.faults;
  auto actions = setup.worker.fault_actions;
  auto start = setup.node_start;
  node.children.push_back({"fault_injector",
                           [plan, actions, start, crash](caf::actor_system& sys) {
                             return spawn_fault_injector(sys, plan, actions, start, crash);
                           },
                           restart_policy::permanent, milliseconds(1000)});

  // One worker group per local rank (cluster.gpus_per_node), each one rank of the world.
  for (int local_rank = 0; local_rank < local_ranks; ++local_rank)
    node.children.push_back(supervisor_child(
        worker_group_config(setup.worker, local_rank, local_ranks), restart_policy::transient));
  return node;
}

supervisor_config job_supervisor_config(const config::JobConfig& config, caf::actor router,
                                        caf::actor refusal_logger,
                                        std::uint16_t port, const std::string& host,
                                        std::shared_ptr<std::atomic<std::uint16_t>> published_port,
                                        std::shared_ptr<const metrics::TraceRecorder> trace) {
  supervisor_config job;
  job.name = "job_supervisor";
  job.strategy = restart_strategy::one_for_one;
  job.max_restarts = 3;
  job.restart_period = std::chrono::seconds(30);
  job.listener = router;
  coordinator_config cc = coordinator_config_of(config, std::move(trace));
  cc.listener = refusal_logger;
  const bool tls = !config.cluster.tls_ca.empty();
  job.children.push_back(
      {"coordinator",
       [cc, port, host, published_port, tls](caf::actor_system& sys) {
         auto coordinator = spawn_coordinator(sys, cc);
         if (!coordinator) throw std::runtime_error(sys.render(coordinator.error()));
         // A restart publishes on the port the first start got (port 0 = any).
         const std::uint16_t wanted = published_port->load() != 0 ? published_port->load() : port;
         auto bound = publish_coordinator(sys, *coordinator, wanted, host, tls);
         if (!bound) {
           caf::anon_send_exit(*coordinator, caf::exit_reason::kill);
           throw std::runtime_error("cannot publish the coordinator on " + host + ":" +
                                    std::to_string(wanted) + ": " + sys.render(bound.error()));
         }
         published_port->store(*bound);
         // This node's agent joins it directly (coordinator_succession.hpp).
         names::register_handle(sys, names::coordinator, *coordinator);
         return *coordinator;
       },
       restart_policy::permanent, milliseconds(2000)});
  return job;
}

}  // namespace dseek::actors
