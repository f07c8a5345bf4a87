// The actor tree of one dseek node (DESIGN.md "Supervision and recovery"):
//
//   job_supervisor (coordinator node only)   `- coordinator, published on its port
//   node_supervisor (one_for_one)
//     |- metrics_exporter   the node's events.jsonl and its Prometheus /metrics
//     |- health_monitor     step watchdog, replica checksum disagreements (sdc_detected)
//     |- checkpoint_writer  persists checkpoint snapshots
//     |- data_prefetcher    data.prefetch steps of batches ready ahead of the worker
//                           (one per worker group: data_prefetcher_<i> for local rank i > 0)
//     |- membership         the node agent: join, heartbeats, epochs, graceful leave
//     |- fault_injector     timed [[faults]]
//     `- worker_group (one_for_all)   one per local rank: worker_group_0 .. _{G-1} when
//          |                           cluster.gpus_per_node = G > 1, each a rank of the
//          |                           world on its device (G = 1: "worker_group")
//          |- gradient_shard_0 .. _{N-1}   the optimizer state, N = train.threads
//          |- pipeline_stage  the stage trainer of a pipeline or tensor-parallel job
//          |                  (parallel.pipeline or parallel.tensor > 1; one per group,
//          |                  registered per local rank)
//          `- worker        the training (transient: a finished job is not restarted)
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
