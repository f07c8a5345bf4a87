// The actor tree of one dseek node (the tree: docs/design.md "The node's control loop"):
// a job_supervisor with the coordinator on the coordinator node; on every node a
// node_supervisor (one_for_one) over metrics_exporter, health_monitor, checkpoint_writer,
// one data_prefetcher per worker group (data_prefetcher_<i> for local rank i > 0),
// membership (the node agent), fault_injector and one worker_group (one_for_all) per
// local rank (worker_group_0 .. _{G-1} when cluster.gpus_per_node = G > 1, else
// "worker_group"): gradient_shard_0 .. _{N-1} (N = train.threads), pipeline_stage (a
// pipeline or tensor-parallel job's), worker (transient: a finished job is not restarted).
//
// Children start in this order and stop in reverse: the worker stops (final checkpoint)
// before the node leaves the job, and before its gradient_shards. Every supervisor
// reports to the event router.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/cluster/cluster_settings.hpp"
#include "actors/cluster/coordinator_succession.hpp"
#include "actors/worker_group/worker.hpp"
#include "actors/supervision/supervisor.hpp"

namespace dseek::metrics {
class MetricsEndpoint;
}

namespace dseek::actors {

// The cluster settings of a job config.
ClusterSettings cluster_settings_of(const config::ClusterConfig& cluster);

struct node_tree_setup {
  worker_setup worker;        // config, run dir, events, faults, router, main
  std::string coordinator;    // host:port the agent joins
  // The coordinator's succession (cluster.backup_coordinators; null: none).
  std::shared_ptr<CoordinatorSuccession> succession;
  std::chrono::steady_clock::time_point node_start;
  std::shared_ptr<metrics::MetricsEndpoint> metrics_endpoint;  // null: no /metrics
};

// The succession of the job's coordinator for this node (cluster.backup_coordinators:
// the primary, then the backups; a backup of this node's starts a coordinator with the
// job's quorum here, published on its address). Null when the job has no backups.
// A coordinator it starts keeps time on `trace`'s clock (the node's).
std::shared_ptr<CoordinatorSuccession> coordinator_succession_of(
    const config::JobConfig& config, std::shared_ptr<const metrics::TraceRecorder> trace);

// The node supervisor's spec, ready for spawn_supervisor().
supervisor_config node_supervisor_config(const node_tree_setup& setup);

// The job supervisor of the coordinator node: the coordinator, published on `port`
// (0: any free port) of `host`. A restarted coordinator is published again on the same
// port. `published_port` receives the port once the first start published it.
supervisor_config job_supervisor_config(const config::JobConfig& config, caf::actor router,
                                        caf::actor refusal_logger,
                                        std::uint16_t port, const std::string& host,
                                        std::shared_ptr<std::atomic<std::uint16_t>> published_port,
                                        std::shared_ptr<const metrics::TraceRecorder> trace);

}  // namespace dseek::actors
