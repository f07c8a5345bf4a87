// Implementation of metrics_endpoint.hpp.
#include "runtime/metrics/metrics_endpoint.hpp"

#include <stdexcept>

#include "runtime/config/load.hpp"

namespace dseek::metrics {

namespace {

// The run directory's own name ("runs/single/" -> "single"): the run label.
std::string run_name(const std::filesystem::path& run_dir) {
  auto path = run_dir.lexically_normal();
  if (!path.empty() && path.filename().empty()) path = path.parent_path();
  return path.filename().string();
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(const config::JobConfig& config,
                                 const std::filesystem::path& run_dir, EventLog& events)
    : host_(config.metrics.prometheus_host),
      port_(static_cast<uint16_t>(config.metrics.prometheus_port +
                                  (config.metrics.prometheus_port_per_node ? config.cluster.node_id
                                                                           : 0))),
      labels_{{"node", std::to_string(config.cluster.node_id)}, {"run", run_name(run_dir)}},
      metrics_(std::make_shared<TrainingMetrics>(config.train.batch_size * config.model.context)) {
  events.add_listener([metrics = metrics_](std::string_view event, std::string_view fields) {
    metrics->observe(event, fields);
  });
}

std::string MetricsEndpoint::render() const {
  return render_prometheus(metrics_->snapshot(), labels_);
}

uint64_t MetricsEndpoint::open() {
  std::lock_guard lock(mutex_);
  server_.reset();  // a crashed exporter's server, if its exit has not closed it yet
  try {
    server_ = std::make_unique<MetricsHttpServer>(host_, port_, [this] { return render(); });
  } catch (const std::exception& error) {
    // The config's port, in use: a config error (permanent: restarts do not free it).
    throw config::ConfigError("metrics.prometheus_port: the /metrics endpoint " +
                             std::string(error.what()) + " (node K listens on " +
                             "metrics.prometheus_port + K unless metrics.prometheus_port_per_node is false, here port " + std::to_string(port_) +
                             "; metrics.prometheus_host = \"" + host_ + "\")");
  }
  return ++lease_;
}

void MetricsEndpoint::close(uint64_t lease) {
  // Under the lock until the socket is closed: a successor's open() must not try to
  // bind while this server still listens. The server's thread never takes this lock.
  std::lock_guard lock(mutex_);
  if (lease == lease_) server_.reset();
}

std::shared_ptr<MetricsEndpoint> open_metrics_endpoint(const config::JobConfig& config,
                                                       const std::filesystem::path& run_dir,
                                                       EventLog& events) {
  if (config.metrics.prometheus_port == 0) return nullptr;
  return std::make_shared<MetricsEndpoint>(config, run_dir, events);
}

}  // namespace dseek::metrics
