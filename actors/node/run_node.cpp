// Implementation of run_node.hpp.
#include "actors/node/run_node.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/coordinator.hpp"
#include "actors/cluster/tls_files.hpp"
#include "actors/cluster/transport_security.hpp"
#include "actors/faults/fault_actions.hpp"
#include "actors/faults/crash_request.hpp"
#include "actors/faults/fault_plan.hpp"
#include "actors/message_types.hpp"
#include "actors/node/checkpoint_outcomes.hpp"
#include "actors/control/data_plane_link.hpp"
#include "actors/node/event_router.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/node_registry.hpp"
#include "actors/node/node_tree.hpp"
#include "actors/node/world_outcome.hpp"
#include "dist/trace_collectives.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/metrics_endpoint.hpp"
#include "runtime/metrics/node_trace.hpp"
#include "runtime/metrics/step_measures.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/state/stage_memory.hpp"
#include "runtime/util/exit_codes.hpp"
#include "runtime/util/json_fields.hpp"

namespace dseek::actors {

namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The secret a node joins with. A single-node job needs none from the user: its only
// member is itself, so it makes a private one.
void resolve_job_secret(config::JobConfig& config) {
  const char* env = std::getenv("DSEEK_CLUSTER_SECRET");
  if (!config.cluster.secret.empty() || (env != nullptr && *env != '\0')) return;
  if (config.cluster.nodes > 1)
    throw config::ConfigError(
        "a multi-node job needs a cluster secret, the same on every node: set cluster.secret "
        "in the config or the environment variable DSEEK_CLUSTER_SECRET (dseek launch makes "
        "one for its local nodes)");
  config.cluster.secret = make_nonce();
}

class node_system_config : public caf::actor_system_config {
 public:
  explicit node_system_config(const config::ClusterConfig& cluster) {
    register_message_types(*this);
    load<caf::io::middleman>();
    if (!cluster.tls_ca.empty()) {
      load<caf::openssl::manager>();
      openssl_cafile = cluster.tls_ca;
      openssl_certificate = cluster.tls_cert;
      openssl_key = cluster.tls_key;
    }
  }
};

// The reason the node supervisor stopped on its own, from its down message (bounded:
// stopping its remaining children takes moments).
std::string supervisor_gave_up(caf::scoped_actor& main, const supervisor_actor& node,
                               caf::actor_system& sys) {
  std::string reason = "it shut the worker down on its own (no down message within 10 s)";
  bool down = false;
  main->receive_while([&] { return !down; })(
      [&](caf::down_msg& msg) {
        if (msg.source != node.address()) return;
        down = true;
        reason = sys.render(msg.reason);
      },
      caf::after(std::chrono::seconds(10)) >> [&] { down = true; });
  return "the node supervisor stopped: " + reason;
}

// Waits for the job supervisor to publish the coordinator; returns its port or throws
// with the supervisor's reason.
std::uint16_t await_publication(caf::scoped_actor& main, const supervisor_actor& job,
                                const std::atomic<std::uint16_t>& port, const std::string& where) {
  main->monitor(job);
  const auto deadline = clock::now() + 30s;
  std::string failure;
  while (port.load() == 0 && failure.empty() && clock::now() < deadline) {
    main->receive([&](caf::down_msg& down) { failure = main->system().render(down.reason); },
                  caf::after(10ms) >> [] {});
  }
  main->demonitor(job.address());
  if (port.load() == 0)
    throw std::runtime_error("cannot start the coordinator on " + where + ": " +
                             (failure.empty() ? "timeout" : failure));
  return port.load();
}

// The coordinator node stays up until the other nodes left (or `limit`), so that a node
// finishing a little later does not lose its coordinator.
void await_members_leaving(caf::scoped_actor& main, const supervisor_actor& job,
                           std::chrono::milliseconds limit) {
  caf::actor coordinator;
  main->request(job, 5s, which_children_atom::value)
      .receive([&](std::vector<child_info>& children) {
                 if (!children.empty()) coordinator = children.front().handle;
               },
               [](caf::error&) {});
  if (!coordinator) return;
  const auto deadline = clock::now() + limit;
  bool announced = false;
  while (clock::now() < deadline) {
    int members = 0;
    main->request(coordinator, 2s, members_atom::value)
        .receive([&](epoch_started& e) { members = e.world_size; }, [](caf::error&) {});
    if (members == 0) return;
    if (!announced) {
      std::fprintf(stderr, "dseek-node: waiting for %d node(s) to leave the job\n", members);
      announced = true;
    }
    std::this_thread::sleep_for(100ms);
  }
}

// A job ends between two scrapes: metrics.prometheus_linger_seconds keeps the node's
// final values served a while longer (a signal ends the wait).
void linger_for_scrapes(const metrics::MetricsEndpoint& endpoint, int64_t seconds,
                        const std::atomic<bool>* stop) {
  std::fprintf(stderr, "dseek-node: serving /metrics on %s:%u for %llds more "
               "(metrics.prometheus_linger_seconds)\n", endpoint.host().c_str(),
               static_cast<unsigned>(endpoint.port()), static_cast<long long>(seconds));
  const auto deadline = clock::now() + std::chrono::seconds(seconds);
  while (clock::now() < deadline && (stop == nullptr || !stop->load()))
    std::this_thread::sleep_for(100ms);
}

// One console line per recovery of the job, on the coordinator's node (the others
// recover the same step): from which step, from where, in how long. The coordinator
// says the losses and (re)joins themselves.
void say_recoveries(metrics::EventLog& events) {
  events.add_listener([](std::string_view event, std::string_view fields) {
    if (event != "recovered") return;
    const auto step = util::json_number_field(fields, "from_step");
    const auto source = util::json_string_field(fields, "source");
    const auto ms = util::json_number_field(fields, "recovery_ms");
    const auto world = util::json_number_field(fields, "world_size");
    const std::string from = !source ? "?" : *source == "peer" ? "a peer's copy" : *source;
    std::fprintf(stderr, "dseek-node: recovered: training goes on from step %lld (from %s) "
                 "after %.0f ms, %lld node(s)\n", static_cast<long long>(step.value_or(-1)),
                 from.c_str(), ms.value_or(0.0), static_cast<long long>(world.value_or(0)));
  });
}

}  // namespace

int run_node(const config::JobConfig& job_config, const node_options& options) {
  config::JobConfig config = job_config;
  check_fault_targets(config.faults, config.cluster.gpus_per_node);
  check_data_plane_available(config);  // comm.backend = "nccl" needs a build with NCCL
  resolve_job_secret(config);
  // Off loopback without TLS: refused, or warned about under cluster.plaintext = true.
  if (const std::string warning = check_transport_security(config.cluster); !warning.empty())
    std::fprintf(stderr, "dseek-node: %s\n", warning.c_str());
  // Crash requests reach the node's actors from anyone who connects: obeyed only when the
  // job injects crash_actor faults.
  crash_requests_allowed() = std::any_of(config.faults.begin(), config.faults.end(), [](const auto& f) {
    return f.kind == config::FaultKind::crash_actor;
  });
  const auto node_start = clock::now();
  const auto& cluster = config.cluster;
  const bool runs_coordinator = cluster.node_id == cluster.coordinator_node;
  const auto coordinator_at = parse_host_port(cluster.coordinator);
  if (!coordinator_at) throw config::ConfigError("cluster.coordinator: not host:port: " + cluster.coordinator);

  // libcaf_openssl reads these at the first connection and terminates the process on a
  // file it cannot load; check them now, with a message that names the file.
  if (!cluster.tls_ca.empty()) check_tls_files(cluster.tls_ca, cluster.tls_cert, cluster.tls_key);
  node_system_config system_config(cluster);
  caf::actor_system sys{system_config};
  auto events = std::make_shared<metrics::EventLog>(options.run_dir, cluster.node_id);
  if (runs_coordinator && cluster.nodes > 1) say_recoveries(*events);
  // Before the first event, so that the /metrics counters agree with the log.
  const auto metrics_endpoint = metrics::open_metrics_endpoint(config, options.run_dir, *events);
  // A port in use fails this start here, as the config error it is (exit 3, which stops a
  // launched job), not later in the node supervisor, where it read as a failure worth
  // restarts and the launcher went on with fewer nodes and exit 0.
  if (metrics_endpoint) metrics_endpoint->close(metrics_endpoint->open());
  auto checkpoints = std::make_shared<CheckpointOutcomes>();
  auto world = std::make_shared<WorldOutcome>(cluster.nodes, config.elastic.min_nodes);
  events->add_listener([checkpoints, world](std::string_view event, std::string_view fields) {
    checkpoints->observe(event, fields);
    world->observe(event, fields);
  });
  metrics::attach_step_measures(*events, config);  // the "measures" event, then every step's
  metrics::attach_node_trace(*events, options.run_dir, cluster.node_id);
  dist::trace_collectives();  // every data-plane operation as a span of that trace
  events->emit("node_started", util::JsonLine()
                                   .add("pid", static_cast<int64_t>(::getpid()))
                                   .add("nodes", cluster.nodes)
                                   .add("coordinator", cluster.coordinator)
                                   .add("runs_coordinator", runs_coordinator)
                                   .add("incarnation", options.incarnation)
                                   .add("tls", !cluster.tls_ca.empty()));
  caf::scoped_actor main{sys};
  const int local_ranks = static_cast<int>(cluster.gpus_per_node);
  auto router = spawn_event_router(sys, main, local_ranks);

  supervisor_actor job;
  caf::actor refusals;
  std::string coordinator_address = cluster.coordinator;
  if (runs_coordinator) {
    // A single-node job listens on any free port of loopback: nothing joins it from
    // outside, and two such jobs on one machine must not collide.
    const bool alone = cluster.nodes == 1;
    const std::uint16_t port = alone ? 0 : coordinator_at->port;
    const std::string host = alone ? "127.0.0.1" : coordinator_at->host;
    auto published = std::make_shared<std::atomic<std::uint16_t>>(0);
    refusals = spawn_refusal_logger(sys);
    job = spawn_supervisor(sys, job_supervisor_config(config, router, refusals, port, host, published));
    const auto bound = await_publication(main, job, *published, host + ":" + std::to_string(port));
    coordinator_address = host + ":" + std::to_string(bound);
  }

  worker_setup worker;
  worker.config = config;
  worker.run_dir = options.run_dir;
  worker.events = events;
  worker.faults = std::make_shared<FaultPlan>(config.faults, cluster.node_id, options.incarnation);
  worker.fault_actions = std::make_shared<FaultActions>(sys, events);
  worker.router = router;
  worker.node_main = caf::actor_cast<caf::actor>(main);
  worker.incarnation = options.incarnation;
  worker.stage_memory = std::make_shared<train::StageMemory>();
  node_tree_setup tree{worker, coordinator_address, node_start, metrics_endpoint};
  auto node = spawn_supervisor(sys, node_supervisor_config(tree));
  main->monitor(node);

  std::string failure;
  bool permanent = false;  // a failure no restart can cure (failure_kind.hpp)
  bool evicted = false;    // the SDC audit found this node wrong: it leaves for good
  bool finished = false;
  bool signalled = false;
  // Every worker group (one per local rank) reports its training's end; the node is done
  // when all did, and fails when one failed.
  int finished_groups = 0;
  while (!finished && failure.empty()) {
    if (options.stop != nullptr && options.stop->load()) {
      signalled = true;
      break;
    }
    main->receive(
        [&](job_finished& result) {
          finished = ++finished_groups == local_ranks || !result.ok;
          if (!result.ok) failure = result.error;
          permanent = permanent || (!result.ok && result.permanent);
          // (An evicted node that hosts the coordinator finishes the job without training.)
          evicted = evicted || result.evicted;
          // The job's stop vote can end this node's training before this loop polls the
          // node's own signal (the launcher signals every node at once).
          if (options.stop != nullptr && options.stop->load()) signalled = true;
          // This loop has not asked the node supervisor to stop yet: a worker it shut
          // down means the supervisor is stopping on its own (its restart intensity was
          // exceeded). That is the node failing, not the job finishing: wait for the
          // supervisor's down message to say why.
          if (result.ok && result.shut_down_by_supervisor && !signalled)
            failure = supervisor_gave_up(main, node, sys);
        },
        [&](join_refused& refused) {
          failure = "the coordinator at " + refused.coordinator + " refused this node: " +
                    refused.reason;
        },
        [&](agent_event& event) { failure = event.reason; },
        [&](caf::down_msg& down) {
          failure = "the node supervisor stopped: " + sys.render(down.reason);
        },
        caf::after(100ms) >> [] {});
  }
  main->demonitor(node.address());
  if (metrics_endpoint && failure.empty() && !signalled &&
      config.metrics.prometheus_linger_seconds > 0)
    linger_for_scrapes(*metrics_endpoint, config.metrics.prometheus_linger_seconds, options.stop);
  events->emit(failure.empty() ? "node_stopping" : "node_failed",
               util::JsonLine()
                   .add("reason", !failure.empty() ? failure
                                  : signalled       ? "signal"
                                  : evicted ? "job finished; this node was evicted by the SDC audit "
                                              "and only coordinated after it"
                                            : "job finished"));
  if (!failure.empty()) std::fprintf(stderr, "dseek-node: %s\n", failure.c_str());
  // A node that fails leaves as a lost node: its peers abort their collectives with it.
  if (!failure.empty()) names::send_to(sys, names::membership, leave_atom::value, failure);

  // Reverse start order: the worker stops (final checkpoint), then the node leaves.
  main->request(node, std::chrono::seconds(300), shutdown_atom::value)
      .receive([](caf::ok_atom) {}, [](caf::error&) {});
  if (job) {
    await_members_leaving(main, job, failure.empty() ? std::chrono::milliseconds(120000)
                                                     : std::chrono::milliseconds(3000));
    main->request(job, 10s, shutdown_atom::value).receive([](caf::ok_atom) {}, [](caf::error&) {});
  }
  caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  if (refusals) caf::anon_send_exit(refusals, caf::exit_reason::user_shutdown);
  if (options.stopped_early != nullptr) *options.stopped_early = signalled;
  // The worker has stopped: its final checkpoint was written, or failed. A run that ends
  // without its last checkpoint lost its state: not a success, and no restart cures a full
  // disk (exit 3 stops a launched job instead of training it again).
  if (const std::string lost = checkpoints->final_failure(); failure.empty() && !lost.empty()) {
    events->emit("node_failed", util::JsonLine().add("reason", lost));
    std::fprintf(stderr, "dseek-node: %s\n", lost.c_str());
    return exit_code::permanent;
  }
  // A job that finished on fewer nodes than configured without consent (elastic.min_nodes)
  // lost capacity: not a success, and no restart brings the finished job's nodes back.
  if (const std::string shrunk = world->shrink_without_consent();
      failure.empty() && !signalled && !shrunk.empty()) {
    events->emit("node_failed", util::JsonLine().add("reason", shrunk));
    std::fprintf(stderr, "dseek-node: %s\n", shrunk.c_str());
    return exit_code::permanent;
  }
  if (evicted) return exit_code::evicted;
  if (failure.empty()) return exit_code::ok;
  return permanent ? exit_code::permanent : exit_code::failed;
}

}  // namespace dseek::actors
