// A node's Prometheus endpoint (metrics.prometheus_port > 0): the node's TrainingMetrics,
// fed by its event log, served by a MetricsHttpServer on metrics.prometheus_host, port
// metrics.prometheus_port + cluster.node_id (the port itself when
// metrics.prometheus_port_per_node is false), with the labels node (and run, the run
// directory's name). The metrics_exporter actor holds the server while it runs: open()
// when it starts, close() when it exits, so a restarted exporter listens again on the
// same port while the counters, which live here, go on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/metrics_http_server.hpp"
#include "runtime/metrics/prometheus_text.hpp"
#include "runtime/metrics/training_metrics.hpp"

namespace dseek::metrics {

class MetricsEndpoint {
 public:
  // Starts folding `events` (from now on) into the metrics; listens only at open().
  MetricsEndpoint(const config::JobConfig& config, const std::filesystem::path& run_dir,
                  EventLog& events);

  // Listens and serves, after closing the server of a previous open(); returns the lease
  // that close() takes. Throws std::runtime_error naming metrics.prometheus_port and the
  // port when it cannot listen (the port is taken, the address is not this host's).
  uint64_t open();
  // Stops serving if `lease` is still the current one (an exporter that exits after its
  // successor opened leaves the successor's server alone).
  void close(uint64_t lease);

  // The port this node listens on: metrics.prometheus_port (+ cluster.node_id per node).
  uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  // The exposition text of the metrics now.
  std::string render() const;

 private:
  std::string host_;
  uint16_t port_;
  MetricLabels labels_;
  std::shared_ptr<TrainingMetrics> metrics_;
  std::mutex mutex_;
  std::unique_ptr<MetricsHttpServer> server_;
  uint64_t lease_ = 0;
};

// The endpoint of a node whose config asks for one, else nullptr.
std::shared_ptr<MetricsEndpoint> open_metrics_endpoint(const config::JobConfig& config,
                                                       const std::filesystem::path& run_dir,
                                                       EventLog& events);

}  // namespace dseek::metrics
