// validate(): a JobConfig is usable. Rechecks every key against the key table (a config
// built in code never went through the loader) and then the relations between keys,
// which no single key's range can express.
#include <charconv>
#include <cmath>
#include <string>

#include "runtime/config/backup_coordinators.hpp"
#include "runtime/config/load.hpp"
#include "runtime/config/memory_bound.hpp"
#include "runtime/config/schema.hpp"
#include "runtime/model/recompute_policy.hpp"

namespace dseek::config {

namespace {

[[noreturn]] void fail(const JobConfig& config, const std::string& message) {
  throw ConfigError((config.source.empty() ? std::string("config") : config.source) + ": " +
                    message);
}

template <class Root>
void check_keys(const JobConfig& config, const Root& root,
                const std::vector<schema::Key<Root>>& keys, const std::string& prefix) {
  for (const auto& key : keys) {
    if (auto problem = schema::check(key, key.get(root))) {
      fail(config, prefix + std::string(prefix.empty() ? key.name : key.leaf()) + ": " + *problem);
    }
  }
}

// "host:port" with a non-empty host and a port in 1..65535; the host is resolved later.
bool valid_endpoint(const std::string& endpoint) {
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size()) return false;
  const char* first = endpoint.data() + colon + 1;
  const char* last = endpoint.data() + endpoint.size();
  int port = 0;
  auto [end, error] = std::from_chars(first, last, port);
  return error == std::errc() && end == last && port >= 1 && port <= 65535;
}

}  // namespace

void validate(const JobConfig& config) {
  check_keys(config, config, schema::job_keys(), "");
  for (size_t i = 0; i < config.faults.size(); ++i) {
    check_keys(config, config.faults[i], schema::fault_keys(),
               "faults[" + std::to_string(i) + "].");
  }

  // Scaling by a power of two changes no mantissa bits (optim/loss_scaler.hpp).
  int loss_scale_exponent = 0;
  if (std::frexp(config.train.loss_scale_init, &loss_scale_exponent) != 0.5) {
    fail(config, "train.loss_scale_init (" + std::to_string(config.train.loss_scale_init) +
                     ") must be a power of two");
  }

  const auto& model = config.model;
  if (!dseek::model::parse_recompute_policy(model.recompute)) {
    fail(config, "model.recompute: expected \"none\" or \"every:N\" with an integer N >= 1, "
                 "got " + schema::quote(model.recompute));
  }
  if (model.dim % model.heads != 0) {
    fail(config, "model.dim (" + std::to_string(model.dim) +
                     ") must be divisible by model.heads (" + std::to_string(model.heads) + ")");
  }
  // Tensor parallelism splits the heads and the vocabulary evenly over the group
  // (model/tensor_parallel_layout.hpp).
  const int64_t tensor = config.parallel.tensor;
  if (tensor > 1 && model.heads % tensor != 0) {
    fail(config, "model.heads (" + std::to_string(model.heads) +
                     ") must be divisible by parallel.tensor (" + std::to_string(tensor) + ")");
  }
  if (tensor > 1 && model.vocab % tensor != 0) {
    fail(config, "model.vocab (" + std::to_string(model.vocab) +
                     ") must be divisible by parallel.tensor (" + std::to_string(tensor) + ")");
  }
  const auto& train = config.train;
  if (train.micro_batch_size != 0 && train.batch_size % train.micro_batch_size != 0) {
    fail(config, "train.batch_size (" + std::to_string(train.batch_size) +
                     ") must be divisible by train.micro_batch_size (" +
                     std::to_string(train.micro_batch_size) + ")");
  }
  if (train.min_lr > train.lr) {
    fail(config, "train.min_lr (" + schema::format_value(train.min_lr) +
                     ") must be <= train.lr (" + schema::format_value(train.lr) + ")");
  }
  const auto& cluster = config.cluster;
  if (cluster.node_id >= cluster.nodes) {
    fail(config, "cluster.node_id (" + std::to_string(cluster.node_id) +
                     ") must be < cluster.nodes (" + std::to_string(cluster.nodes) + ")");
  }
  if (!valid_endpoint(cluster.coordinator)) {
    fail(config, "cluster.coordinator: expected host:port with a port in 1..65535, got " +
                     schema::quote(cluster.coordinator));
  }
  const auto& parallel = config.parallel;
  // Data parallelism splits every global batch over the nodes (and a world that shrank
  // after a node loss over the survivors; that is checked when it happens). A pipeline
  // runs one stage per rank, each on the whole batch (its micro-batches are checked
  // with the schedule, train/pipeline/plan.cpp).
  // A tensor-parallel group likewise runs one rank per rank of the world, each on the
  // whole batch. The world is cluster.nodes x cluster.gpus_per_node ranks (a node runs
  // one per worker group).
  const bool data_parallel_nodes = parallel.pipeline == 1 && parallel.tensor == 1;
  const int64_t world_ranks = cluster.nodes * cluster.gpus_per_node;
  const std::string world =
      (cluster.gpus_per_node == 1 ? "cluster.nodes (" : "cluster.nodes x cluster.gpus_per_node (") +
      std::to_string(world_ranks) + ")";
  const std::string per_rank = cluster.gpus_per_node == 1 ? " per node" : " per rank";
  if (parallel.pipeline > 1 && parallel.tensor == 1 && parallel.data == 1 &&
      parallel.pipeline != world_ranks) {
    fail(config, "parallel.pipeline (" + std::to_string(parallel.pipeline) + ") must equal " +
                     world + ": one pipeline stage" + per_rank);
  }
  if (parallel.pipeline > 1 && parallel.tensor > 1 && parallel.data == 1 &&
      parallel.pipeline * parallel.tensor != world_ranks) {
    fail(config, "parallel.pipeline (" + std::to_string(parallel.pipeline) +
                     ") x parallel.tensor (" + std::to_string(parallel.tensor) +
                     ") must equal " + world + ": one tensor-parallel rank of one pipeline "
                     "stage" + per_rank);
  }
  if (parallel.tensor > 1 && parallel.data == 1 && parallel.pipeline == 1 &&
      parallel.tensor != world_ranks) {
    fail(config, "parallel.tensor (" + std::to_string(parallel.tensor) + ") must equal " +
                     world + ": one tensor-parallel rank" + per_rank);
  }
  // data.balance = "throughput" shares whole micro-batches by speed: any batch of at
  // least one micro-batch per replica.
  const bool equal_slices = config.data.balance == Balance::equal;
  if (!equal_slices) {
    const int64_t replicas = data_parallel_nodes ? world_ranks : parallel.data;
    if (train.micro_batch_size == 0)
      fail(config, "data.balance = \"throughput\" shares the batch out in micro-batches: set "
                   "train.micro_batch_size");
    const int64_t micro_batches = train.batch_size / train.micro_batch_size;
    // An interleaved pipeline runs a multiple of its stages.
    const int64_t unit = parallel.schedule == Schedule::interleaved ? parallel.pipeline : 1;
    if (micro_batches % unit != 0)
      fail(config, "data.balance = \"throughput\" with parallel.schedule = \"interleaved\": "
                   "train.batch_size / train.micro_batch_size (" + std::to_string(micro_batches) +
                       ") must be a multiple of parallel.pipeline (" +
                       std::to_string(parallel.pipeline) + ")");
    if (micro_batches / unit < replicas)
      fail(config, "data.balance = \"throughput\": train.batch_size / train.micro_batch_size (" +
                       std::to_string(micro_batches) + " micro-batches" +
                       (unit > 1 ? ", in groups of parallel.pipeline" : "") +
                       ") must be at least the " + std::to_string(replicas) +
                       " replicas: every replica trains at least one" +
                       (unit > 1 ? " group" : ""));
  }
  if (equal_slices && data_parallel_nodes && cluster.nodes > 1 && cluster.gpus_per_node == 1 &&
      train.batch_size % cluster.nodes != 0) {
    fail(config, "train.batch_size (" + std::to_string(train.batch_size) +
                     ") must be divisible by cluster.nodes (" + std::to_string(cluster.nodes) +
                     "): every node trains an equal slice of the global batch");
  }
  if (equal_slices && data_parallel_nodes && cluster.nodes > 1 && cluster.gpus_per_node == 1 &&
      train.micro_batch_size > 0 &&
      (train.batch_size / cluster.nodes) % train.micro_batch_size != 0) {
    fail(config, "train.micro_batch_size (" + std::to_string(train.micro_batch_size) +
                     ") must divide each node's slice of the batch (train.batch_size / "
                     "cluster.nodes = " + std::to_string(train.batch_size / cluster.nodes) + ")");
  }
  // Several worker groups a node: every one of the nodes x gpus_per_node ranks trains an
  // equal slice.
  const int64_t ranks = cluster.nodes * cluster.gpus_per_node;
  if (equal_slices && data_parallel_nodes && cluster.gpus_per_node > 1 &&
      train.batch_size % ranks != 0) {
    fail(config, "train.batch_size (" + std::to_string(train.batch_size) +
                     ") must be divisible by cluster.nodes x cluster.gpus_per_node (" +
                     std::to_string(ranks) + "): every rank trains an equal slice of the "
                     "global batch");
  }
  if (equal_slices && data_parallel_nodes && cluster.gpus_per_node > 1 &&
      train.micro_batch_size > 0 &&
      (train.batch_size / ranks) % train.micro_batch_size != 0) {
    fail(config, "train.micro_batch_size (" + std::to_string(train.micro_batch_size) +
                     ") must divide each rank's slice of the batch (train.batch_size / "
                     "(cluster.nodes x cluster.gpus_per_node) = " +
                     std::to_string(train.batch_size / ranks) + ")");
  }
  // Replicas of a pipeline or a tensor-parallel group each run an equal slice of the
  // batch (a pipeline's micro-batches are checked with its schedule).
  if (equal_slices && !data_parallel_nodes && parallel.data > 1 &&
      train.batch_size % parallel.data != 0) {
    fail(config, "train.batch_size (" + std::to_string(train.batch_size) +
                     ") must be divisible by parallel.data (" + std::to_string(parallel.data) +
                     "): every replica trains an equal slice of the global batch");
  }
  if (equal_slices && parallel.tensor > 1 && parallel.pipeline == 1 && parallel.data > 1 &&
      train.micro_batch_size > 0 && (train.batch_size / parallel.data) % train.micro_batch_size != 0) {
    fail(config, "train.micro_batch_size (" + std::to_string(train.micro_batch_size) +
                     ") must divide each replica's slice of the batch (train.batch_size / "
                     "parallel.data = " + std::to_string(train.batch_size / parallel.data) + ")");
  }
  if (parallel.data > 1 && parallel.data * parallel.tensor * parallel.pipeline != world_ranks) {
    fail(config, "parallel.data (" + std::to_string(parallel.data) + ") x parallel.tensor (" +
                     std::to_string(parallel.tensor) + ") x parallel.pipeline (" +
                     std::to_string(parallel.pipeline) + ") must equal " + world);
  }
  if (cluster.coordinator_node >= cluster.nodes) {
    fail(config, "cluster.coordinator_node (" + std::to_string(cluster.coordinator_node) +
                     ") must be < cluster.nodes (" + std::to_string(cluster.nodes) + ")");
  }
  try {
    for (const auto& backup : parse_backup_coordinators(cluster.backup_coordinators)) {
      if (backup.node_id >= cluster.nodes || backup.node_id == cluster.coordinator_node)
        fail(config, "cluster.backup_coordinators: node " + std::to_string(backup.node_id) +
                         " must be another node than cluster.coordinator_node (" +
                         std::to_string(cluster.coordinator_node) + ") and < cluster.nodes (" +
                         std::to_string(cluster.nodes) + ")");
    }
  } catch (const std::invalid_argument& e) {
    fail(config, std::string("cluster.backup_coordinators: ") + e.what());
  }
  if (cluster.heartbeat_timeout_ms <= cluster.heartbeat_interval_ms) {
    fail(config, "cluster.heartbeat_timeout_ms (" + std::to_string(cluster.heartbeat_timeout_ms) +
                     ") must be > cluster.heartbeat_interval_ms (" +
                     std::to_string(cluster.heartbeat_interval_ms) + ")");
  }
  const bool any_tls = !cluster.tls_ca.empty() || !cluster.tls_cert.empty() ||
                       !cluster.tls_key.empty();
  if (any_tls && (cluster.tls_ca.empty() || cluster.tls_cert.empty() || cluster.tls_key.empty())) {
    fail(config, "cluster.tls_ca, cluster.tls_cert and cluster.tls_key go together: set all "
                 "three for TLS, or none");
  }
  if (config.elastic.min_nodes > cluster.nodes) {
    fail(config, "elastic.min_nodes (" + std::to_string(config.elastic.min_nodes) +
                     ") must be <= cluster.nodes (" + std::to_string(cluster.nodes) + ")");
  }
  // Node K listens on metrics.prometheus_port + K.
  const auto& metrics = config.metrics;
  if (metrics.prometheus_port > 0 && metrics.prometheus_port_per_node &&
      metrics.prometheus_port + cluster.nodes - 1 > 65535) {
    fail(config, "metrics.prometheus_port (" + std::to_string(metrics.prometheus_port) +
                     ") + cluster.nodes - 1 must be <= 65535: node K listens on port + K");
  }
  for (size_t i = 0; i < config.faults.size(); ++i) {
    const auto& fault = config.faults[i];
    std::string name = "faults[" + std::to_string(i) + "]";
    if (fault.node >= cluster.nodes) {
      fail(config, name + ".node (" + std::to_string(fault.node) +
                       ") must be < cluster.nodes (" + std::to_string(cluster.nodes) + ")");
    }
    if (fault.step < 0 && fault.after_seconds < 0) {
      fail(config, name + ": set step or after_seconds, else the fault never fires");
    }
    if (fault.kind == config::FaultKind::drop_messages && fault.fraction <= 0) {
      fail(config, name + ".fraction: drop_messages needs a fraction in (0, 1]");
    }
    if (fault.kind == config::FaultKind::slow && fault.ms <= 0) {
      fail(config, name + ".ms: slow needs the extra milliseconds per step (ms > 0)");
    }
    if (fault.during == config::FaultDuring::reduction &&
        ((fault.kind != config::FaultKind::kill && fault.kind != config::FaultKind::hang) || fault.step < 0)) {
      fail(config, name + ".during = \"reduction\" applies to kill and hang at a step");
    }
    if ((fault.where != config::FaultWhere::reduced || fault.every_step) &&
        fault.kind != config::FaultKind::corrupt_gradient) {
      fail(config, name + ".where and .every_step apply to corrupt_gradient");
    }
    if (fault.kind == config::FaultKind::crash_actor && fault.actor.empty()) {
      fail(config, name + ".actor: crash_actor needs the name of the actor to crash");
    }
  }
  // Before anything is allocated: a model that cannot fit fails here, named, instead of
  // in a bare std::bad_alloc.
  if (auto shortfall = memory_shortfall(config, physical_memory_bytes())) fail(config, *shortfall);
}

}  // namespace dseek::config
