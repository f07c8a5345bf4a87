// Implementation of embedded_node.hpp: the node actor. Until issue 27 this was run_node's
// main loop on a scoped_actor of an actor system of its own; it is now an event-based
// actor of the caller's system, its phases driven by messages and one timer:
//
//   starting   the coordinator node waits (<= 30 s) for its coordinator's publication
//   running    the tree trains; job_finished, join_refused, agent_event or the node
//              supervisor's down message end it, or a stop request
//   lingering  metrics.prometheus_linger_seconds after a finished job (a stop ends it)
//   stopping   the tree stops in reverse start order (worker, final checkpoint, leave);
//              the coordinator node waits for the other members to leave first
//   finished   the result goes to the subscribers; the actor exits
#include "actors/node/embedded_node.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/cluster_settings.hpp"
#include "actors/cluster/openssl_error_queue.hpp"
#include "actors/cluster/tls_files.hpp"
#include "actors/cluster/transport_security.hpp"
#include "actors/control/data_plane_link.hpp"
#include "actors/faults/crash_request.hpp"
#include "actors/faults/fault_actions.hpp"
#include "actors/faults/fault_plan.hpp"
#include "actors/message_types.hpp"
#include "actors/node/checkpoint_outcomes.hpp"
#include "actors/node/event_router.hpp"
#include "actors/node/node_registry.hpp"
#include "actors/node/node_tree.hpp"
#include "actors/node/world_outcome.hpp"
#include "actors/supervision/supervisor.hpp"
#include "runtime/config/load.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/metrics_endpoint.hpp"
#include "runtime/metrics/node_trace.hpp"
#include "runtime/metrics/step_measures.hpp"
#include "runtime/metrics/trace_spans.hpp"
#include "runtime/train/state/checkpointing.hpp"
#include "runtime/train/state/stage_memory.hpp"
#include "runtime/train/step_control.hpp"
#include "runtime/util/exit_codes.hpp"
#include "runtime/util/json_fields.hpp"

namespace dseek::actors {

namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The node actor's own timer (every 10 ms while starting, 100 ms after) and the pause
// between two polls of the members still in the job.
using node_tick_atom = caf::atom_constant<caf::atom("dntick")>;
using members_poll_atom = caf::atom_constant<caf::atom("dnmembers")>;

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

// The node's subscribers and its status, shared by the event log's listener (called on
// any thread: the worker's, the actors'; one event at a time, in the file's order) and
// the node actor.
class event_fanout {
 public:
  void add(caf::actor subscriber) {
    std::lock_guard lock(mutex_);
    subscribers_.push_back(std::move(subscriber));
  }
  // The node actor, told of the events that answer its pause and checkpoint requests.
  void set_owner(caf::actor owner) {
    std::lock_guard lock(mutex_);
    owner_ = std::move(owner);
  }
  void observe(std::string_view event, std::string_view fields) {
    std::lock_guard lock(mutex_);
    fold(event, fields);
    for (const auto& subscriber : subscribers_)
      caf::anon_send(subscriber, node_event{std::string(event), std::string(fields)});
    if (owner_ && (event == "train_paused" || event == "checkpoint_now"))
      caf::anon_send(owner_, node_event{std::string(event), std::string(fields)});
  }
  node_status status() const {
    std::lock_guard lock(mutex_);
    return status_;
  }
  // The params_sha256 of the run's end event (train_done / train_stopped), if any.
  std::string params_sha256() const {
    std::lock_guard lock(mutex_);
    return params_sha256_;
  }
  void set_phase(std::string phase) {
    std::lock_guard lock(mutex_);
    status_.phase = std::move(phase);
  }
  // Tells every subscriber `result` (after every event so far) and forgets them.
  void finish(const node_result& result) {
    std::lock_guard lock(mutex_);
    status_.phase = "finished";
    for (const auto& subscriber : subscribers_) caf::anon_send(subscriber, result);
    subscribers_.clear();
    owner_ = caf::actor{};
  }

 private:
  void fold(std::string_view event, std::string_view fields) {
    auto set = [&](auto& field, std::string_view key) {
      if (const auto value = util::json_number_field(fields, key))
        field = static_cast<std::remove_reference_t<decltype(field)>>(*value);
    };
    if (event == "epoch_started") {
      set(status_.epoch, "epoch");
      set(status_.world_size, "world_size");
    } else if (event == "train_paused" && status_.phase == "running") {
      status_.phase = "paused";
    } else if (event == "train_resumed" && status_.phase == "paused") {
      status_.phase = "running";
    } else if (event == "step" || event == "train_done" || event == "train_stopped") {
      set(status_.step, "step");
      set(status_.loss, "loss");
      set(status_.tokens_per_s, "tokens_per_s");
      if (event != "step")
        if (auto params = util::json_string_field(fields, "params_sha256")) params_sha256_ = *params;
    }
  }

  mutable std::mutex mutex_;
  std::vector<caf::actor> subscribers_;
  caf::actor owner_;
  node_status status_;
  std::string params_sha256_;
};

// What spawn_node prepared (everything that can throw) for the node actor.
struct node_setup {
  config::JobConfig config;
  node_options options;
  std::shared_ptr<metrics::EventLog> events;
  // The node's trace clock and span listener: the node's own, handed to its actors (no
  // process-wide state; so is its crash policy, crash_requests_of its config).
  std::shared_ptr<metrics::TraceRecorder> trace;
  std::shared_ptr<metrics::MetricsEndpoint> metrics_endpoint;  // null: no /metrics
  std::shared_ptr<CheckpointOutcomes> checkpoints;
  std::shared_ptr<WorldOutcome> world;
  std::shared_ptr<event_fanout> fanout;
  std::shared_ptr<FaultPlan> faults;
  std::shared_ptr<FaultActions> fault_actions;
  clock::time_point node_start;
};

enum class phase { starting, running, lingering, stopping, finished };

struct node_state {
  node_setup setup;
  phase now = phase::starting;
  caf::actor router;
  caf::actor refusals;
  supervisor_actor job;   // the coordinator node's job supervisor
  supervisor_actor node;  // the node supervisor (the tree)
  std::shared_ptr<std::atomic<std::uint16_t>> published;
  std::string coordinator_host;   // where the coordinator is published
  std::string coordinator_where;  // host:port (the port asked for, then the one bound)
  clock::time_point deadline;     // of the publication, the linger, the members leaving
  caf::actor coordinator;         // asked for the members still in the job
  // Where the job's coordinator may move (cluster.backup_coordinators; null: nowhere),
  // and the backup coordinator this node runs after a failover.
  std::shared_ptr<CoordinatorSuccession> succession;
  bool announced_waiting = false;
  // The node supervisor shut the worker down on its own: waiting for its down message.
  bool awaiting_supervisor_down = false;
  // How the job ended (the result's parts).
  std::string failure;
  bool permanent = false;  // a failure no restart can cure (failure_kind.hpp)
  bool evicted = false;    // the SDC audit found this node wrong: it leaves for good
  bool signalled = false;  // a stop request ended the training
  int finished_groups = 0;
  std::int64_t steps = 0;
  std::string params_sha256;
  // Pause and checkpoint-now: the flags the training reads, this node's pause, the
  // requests waiting for their event. Checkpoint requests in batches: those that came
  // while the flag was still set share one checkpoint, answered when every worker group
  // of the node reported it (one checkpoint_now event each).
  std::shared_ptr<train::StepControl> control = std::make_shared<train::StepControl>();
  bool holds_pause = false;
  std::vector<caf::response_promise> pause_waiters;
  std::deque<std::vector<caf::response_promise>> checkpoint_waiters;
  // Every actor of the node's tree, killed when the node actor ends (however it ends:
  // after an orderly stop they are gone already).
  std::shared_ptr<std::vector<caf::actor>> tree = std::make_shared<std::vector<caf::actor>>();
  int checkpoint_reports = 0;  // checkpoint_now events of the oldest batch so far
  static inline const char* name = "dseek.node";
};

using node_self = caf::stateful_actor<node_state>;

bool stop_flag_set(const node_state& s) {
  return s.setup.options.stop != nullptr && s.setup.options.stop->load();
}

void stop_tree(node_self* self);
void finish(node_self* self);

// The training ended before the pause and checkpoint requests still waiting.
void fail_waiters(node_state& s) {
  for (auto& waiter : s.pause_waiters) waiter.deliver(make_error(node_errc::ended));
  s.pause_waiters.clear();
  for (auto& batch : s.checkpoint_waiters)
    for (auto& waiter : batch) waiter.deliver(make_error(node_errc::ended));
  s.checkpoint_waiters.clear();
}

// The job ended, failed or was stopped: linger for scrapes if asked, then stop the tree.
void end_running(node_self* self) {
  auto& s = self->state;
  fail_waiters(s);
  s.awaiting_supervisor_down = false;
  s.setup.fanout->set_phase("stopping");
  const auto& endpoint = s.setup.metrics_endpoint;
  const int64_t linger = s.setup.config.metrics.prometheus_linger_seconds;
  if (endpoint && s.failure.empty() && !s.signalled && linger > 0) {
    // A job ends between two scrapes: the node's final values are served a while longer.
    std::fprintf(stderr, "dseek-node: serving /metrics on %s:%u for %llds more "
                 "(metrics.prometheus_linger_seconds)\n", endpoint->host().c_str(),
                 static_cast<unsigned>(endpoint->port()), static_cast<long long>(linger));
    s.now = phase::lingering;
    s.deadline = clock::now() + std::chrono::seconds(linger);
    return;
  }
  stop_tree(self);
}

void stop_job(node_self* self) {
  auto& s = self->state;
  if (!s.job) {  // a backup coordinator's node: its coordinator goes with it
    if (s.succession) s.succession->stop_hosting();
    return finish(self);
  }
  self->request(s.job, 10s, shutdown_atom::value)
      .then([self](caf::ok_atom) { finish(self); }, [self](caf::error&) { finish(self); });
}

// The coordinator node stays up until the other nodes left (or the deadline), so that a
// node finishing a little later does not lose its coordinator.
void poll_members(node_self* self) {
  auto& s = self->state;
  if (!s.coordinator || clock::now() >= s.deadline) return stop_job(self);
  self->request(s.coordinator, 2s, members_atom::value)
      .then(
          [self](epoch_started& e) {
            auto& st = self->state;
            if (e.world_size == 0) return stop_job(self);
            if (!st.announced_waiting) {
              std::fprintf(stderr, "dseek-node: waiting for %d node(s) to leave the job\n",
                           e.world_size);
              st.announced_waiting = true;
            }
            self->delayed_send(self, 100ms, members_poll_atom::value);
          },
          [self](caf::error&) { stop_job(self); });
}

// The tree has stopped: the coordinator node waits for the members, then stops its job.
void after_tree(node_self* self) {
  auto& s = self->state;
  if (!s.job) {
    // A node that runs the job's coordinator after a failover waits for the members too.
    s.coordinator = s.succession ? s.succession->hosted() : caf::actor{};
    if (!s.coordinator) return finish(self);
    s.deadline = clock::now() + (s.failure.empty() ? 120000ms : 3000ms);
    return poll_members(self);
  }
  s.deadline = clock::now() + (s.failure.empty() ? 120000ms : 3000ms);
  self->request(s.job, 5s, which_children_atom::value)
      .then(
          [self](std::vector<child_info>& children) {
            if (!children.empty()) self->state.coordinator = children.front().handle;
            poll_members(self);
          },
          [self](caf::error&) { stop_job(self); });
}

void stop_tree(node_self* self) {
  auto& s = self->state;
  s.now = phase::stopping;
  auto& events = *s.setup.events;
  events.emit(s.failure.empty() ? "node_stopping" : "node_failed",
              util::JsonLine().add("reason",
                                   !s.failure.empty() ? s.failure
                                   : s.signalled      ? "signal"
                                   : s.evicted ? "job finished; this node was evicted by the SDC "
                                                 "audit and only coordinated after it"
                                               : "job finished"));
  if (!s.failure.empty()) std::fprintf(stderr, "dseek-node: %s\n", s.failure.c_str());
  // A node that fails leaves as a lost node: its peers abort their collectives with it.
  if (!s.failure.empty())
    names::send_to(self->system(), names::membership, leave_atom::value, s.failure);
  if (!s.node) return after_tree(self);
  // Reverse start order: the worker stops (final checkpoint), then the node leaves.
  self->request(s.node, std::chrono::seconds(300), shutdown_atom::value)
      .then([self](caf::ok_atom) { after_tree(self); }, [self](caf::error&) { after_tree(self); });
}

// The exit code, from how the job ended and what the tree's events said.
node_result result_of(node_state& s) {
  node_result result;
  result.stopped_early = s.signalled;
  result.params_sha256 =
      !s.params_sha256.empty() ? s.params_sha256 : s.setup.fanout->params_sha256();
  const node_status status = s.setup.fanout->status();
  result.steps = s.steps > 0 ? s.steps : status.step;
  result.final_loss = status.loss;
  auto permanent = [&](const std::string& reason) {
    s.setup.events->emit("node_failed", util::JsonLine().add("reason", reason));
    std::fprintf(stderr, "dseek-node: %s\n", reason.c_str());
    result.exit_code = exit_code::permanent;
    result.reason = reason;
    return result;
  };
  // The worker has stopped: its final checkpoint was written, or failed. A run that ends
  // without its last checkpoint lost its state: not a success, and no restart cures a full
  // disk (exit 3 stops a launched job instead of training it again).
  if (const std::string lost = s.setup.checkpoints->final_failure();
      s.failure.empty() && !lost.empty())
    return permanent(lost);
  // A job that finished on fewer nodes than configured without consent (elastic.min_nodes)
  // lost capacity: not a success, and no restart brings the finished job's nodes back.
  if (const std::string shrunk = s.setup.world->shrink_without_consent();
      s.failure.empty() && !s.signalled && !shrunk.empty())
    return permanent(shrunk);
  result.reason = s.failure;
  if (s.evicted) result.exit_code = exit_code::evicted;
  else if (s.failure.empty()) result.exit_code = exit_code::ok;
  else result.exit_code = s.permanent ? exit_code::permanent : exit_code::failed;
  return result;
}

void finish(node_self* self) {
  auto& s = self->state;
  if (s.now == phase::finished) return;
  s.now = phase::finished;
  if (s.succession) s.succession->stop_hosting();
  caf::anon_send_exit(s.router, caf::exit_reason::user_shutdown);
  if (s.refusals) caf::anon_send_exit(s.refusals, caf::exit_reason::user_shutdown);
  const node_result result = result_of(s);
  // The worker is gone: the node's trace takes no more spans (its file was written when
  // the training ended).
  s.setup.trace->set_listener(nullptr);
  s.setup.fanout->finish(result);
  if (result.exit_code == exit_code::ok) self->quit();
  else self->quit(make_error(node_errc::job_failed, caf::make_message(result.exit_code, result.reason)));
}

// The coordinator is published (or this node joins another's): start the node's tree.
void start_tree(node_self* self, const std::string& coordinator_address) {
  auto& s = self->state;
  auto& sys = self->system();
  const auto& config = s.setup.config;
  worker_setup worker;
  worker.config = config;
  worker.run_dir = s.setup.options.run_dir;
  worker.events = s.setup.events;
  worker.trace = s.setup.trace;
  worker.faults = s.setup.faults;
  worker.fault_actions = s.setup.fault_actions;
  worker.router = s.router;
  worker.node_main = caf::actor_cast<caf::actor>(self);
  worker.incarnation = s.setup.options.incarnation;
  worker.stage_memory = std::make_shared<train::StageMemory>();
  worker.control = s.control;
  node_tree_setup tree{worker, coordinator_address, s.succession, s.setup.node_start,
                       s.setup.metrics_endpoint};
  s.node = spawn_supervisor(sys, node_supervisor_config(tree));
  s.tree->push_back(caf::actor_cast<caf::actor>(s.node));
  self->monitor(s.node);
  s.now = phase::running;
  s.setup.fanout->set_phase("running");
}

void fail_to_start(node_self* self, const std::string& why) {
  auto& s = self->state;
  self->demonitor(s.job.address());
  s.failure = "cannot start the coordinator on " + s.coordinator_where + ": " + why;
  end_running(self);
}

// A stop request (node_stop_atom or the stop flag). False: nothing left to stop.
bool request_stop(node_self* self) {
  auto& s = self->state;
  switch (s.now) {
    case phase::starting:
      s.signalled = true;
      self->demonitor(s.job.address());
      end_running(self);
      return true;
    case phase::running:
      if (s.awaiting_supervisor_down) return false;
      s.signalled = true;
      end_running(self);
      return true;
    case phase::lingering:
      stop_tree(self);
      return true;
    default:
      return false;
  }
}

void on_tick(node_self* self) {
  auto& s = self->state;
  switch (s.now) {
    case phase::starting:
      if (const auto port = s.published->load(); port != 0) {
        self->demonitor(s.job.address());
        s.coordinator_where = s.coordinator_host + ":" + std::to_string(port);
        start_tree(self, s.coordinator_where);
      } else if (clock::now() >= s.deadline) {
        fail_to_start(self, "timeout");
      }
      break;
    case phase::running:
      if (s.awaiting_supervisor_down && clock::now() >= s.deadline) {
        s.failure = "the node supervisor stopped: it shut the worker down on its own (no "
                    "down message within 10 s)";
        end_running(self);
      } else if (!s.awaiting_supervisor_down && stop_flag_set(s)) {
        request_stop(self);
      }
      break;
    case phase::lingering:
      if (clock::now() >= s.deadline || stop_flag_set(s)) stop_tree(self);
      break;
    default:
      return;  // no more ticks
  }
  self->delayed_send(self, s.now == phase::starting ? 10ms : 100ms, node_tick_atom::value);
}

void on_down(node_self* self, const caf::down_msg& down) {
  auto& s = self->state;
  if (s.now == phase::starting && down.source == s.job.address()) {
    fail_to_start(self, self->system().render(down.reason));
  } else if (s.now == phase::running && down.source == s.node.address()) {
    s.failure = "the node supervisor stopped: " + self->system().render(down.reason);
    end_running(self);
  }
}

caf::behavior node_main(node_self* self, node_setup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  auto& sys = self->system();
  const auto& config = s.setup.config;
  const auto& cluster = config.cluster;
  const bool runs_coordinator = cluster.node_id == cluster.coordinator_node;
  s.succession = coordinator_succession_of(config, s.setup.trace);
  names::register_as(self, names::node);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  // A node actor killed from outside (exit_reason::kill: no handler runs) takes its tree
  // with it, as a crash does: a live tree would train on and keep the system up.
  self->attach_functor([tree = s.tree, succession = s.succession](const caf::error&) {
    if (succession) succession->stop_hosting();
    for (const auto& actor : *tree) caf::anon_send_exit(actor, caf::exit_reason::kill);
  });
  // An exit message (a host supervisor's orderly stop, user_shutdown): stop as for
  // node_stop_atom, and end normally with the result.
  self->set_exit_handler([self](caf::exit_msg&) { request_stop(self); });
  // A handler that throws (a full disk under the event log, say) ends the node: its tree
  // goes with it (a live tree would keep the actor system from shutting down) and the
  // subscribers still get a result.
  self->set_exception_handler([self](caf::scheduled_actor*, std::exception_ptr& thrown) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    auto& st = self->state;
    for (const auto& tree : {caf::actor_cast<caf::actor>(st.node), caf::actor_cast<caf::actor>(st.job),
                             st.router, st.refusals})
      if (tree) caf::anon_send_exit(tree, caf::exit_reason::kill);
    node_result result;
    result.exit_code = exit_code::failed;
    result.reason = "the node actor failed: " + what;
    result.stopped_early = st.signalled;
    const node_status status = st.setup.fanout->status();
    result.steps = status.step;
    result.final_loss = status.loss;
    std::fprintf(stderr, "dseek-node: %s\n", result.reason.c_str());
    try {  // the event log may be what threw
      st.setup.events->emit("node_failed", util::JsonLine().add("reason", result.reason));
    } catch (const std::exception&) {
    }
    st.now = phase::finished;
    st.setup.trace->set_listener(nullptr);
    st.setup.fanout->finish(result);
    return make_error(node_errc::job_failed, caf::make_message(result.exit_code, result.reason));
  });
  s.setup.events->emit("node_started", util::JsonLine()
                                           .add("pid", static_cast<int64_t>(::getpid()))
                                           .add("nodes", cluster.nodes)
                                           .add("coordinator", cluster.coordinator)
                                           .add("runs_coordinator", runs_coordinator)
                                           .add("incarnation", s.setup.options.incarnation)
                                           .add("tls", !cluster.tls_ca.empty()));
  const int local_ranks = static_cast<int>(cluster.gpus_per_node);
  s.router = spawn_event_router(sys, caf::actor_cast<caf::actor>(self), local_ranks);
  s.tree->push_back(s.router);
  if (runs_coordinator) {
    // A single-node job listens on any free port of loopback: nothing joins it from
    // outside, and two such jobs on one machine must not collide.
    const auto at = parse_host_port(cluster.coordinator);  // checked by spawn_node
    const bool alone = cluster.nodes == 1;
    const std::uint16_t port = alone ? 0 : at->port;
    const std::string host = alone ? "127.0.0.1" : at->host;
    s.published = std::make_shared<std::atomic<std::uint16_t>>(0);
    s.refusals = spawn_refusal_logger(sys);
    s.job = spawn_supervisor(sys, job_supervisor_config(config, s.router, s.refusals, port, host,
                                                        s.published, s.setup.trace));
    s.tree->push_back(s.refusals);
    s.tree->push_back(caf::actor_cast<caf::actor>(s.job));
    self->monitor(s.job);
    s.coordinator_host = host;
    s.coordinator_where = host + ":" + std::to_string(port);
    s.deadline = clock::now() + 30s;
  } else {
    start_tree(self, cluster.coordinator);
  }
  s.setup.fanout->set_owner(caf::actor_cast<caf::actor>(self));
  self->send(self, node_tick_atom::value);
  return {
      [self](node_status_atom) { return self->state.setup.fanout->status(); },
      [self](node_subscribe_atom, caf::actor& subscriber) -> caf::result<caf::ok_atom> {
        if (!subscriber) return make_error(node_errc::invalid_subscriber);
        self->state.setup.fanout->add(std::move(subscriber));
        return caf::ok_atom::value;
      },
      [self](node_stop_atom) -> caf::result<caf::ok_atom> {
        if (!request_stop(self)) return make_error(node_errc::already_stopping);
        return caf::ok_atom::value;
      },
      [self](node_pause_atom) -> caf::result<std::int64_t> {
        auto& st = self->state;
        if (st.now != phase::starting && st.now != phase::running)
          return make_error(node_errc::not_running);
        st.holds_pause = true;
        st.control->pause = true;
        if (const node_status status = st.setup.fanout->status(); status.phase == "paused")
          return status.step;
        st.pause_waiters.push_back(self->make_response_promise());
        return st.pause_waiters.back();
      },
      [self](node_resume_atom) -> caf::result<caf::ok_atom> {
        auto& st = self->state;
        if (!st.holds_pause) return make_error(node_errc::not_paused);
        st.holds_pause = false;
        st.control->pause = false;
        return caf::ok_atom::value;
      },
      [self](node_checkpoint_atom) -> caf::result<std::int64_t> {
        auto& st = self->state;
        if (st.now != phase::starting && st.now != phase::running)
          return make_error(node_errc::not_running);
        if (!train::checkpoints_enabled(st.setup.config))
          return make_error(node_errc::no_checkpoints);
        // A flag not yet taken by the training: this request shares its checkpoint.
        const bool flag_pending = st.control->checkpoint.exchange(true);
        if (!flag_pending || st.checkpoint_waiters.empty()) st.checkpoint_waiters.emplace_back();
        st.checkpoint_waiters.back().push_back(self->make_response_promise());
        return st.checkpoint_waiters.back().back();
      },
      // The training's train_paused and checkpoint_now events (event_fanout::set_owner).
      [self](node_event& event) {
        auto& st = self->state;
        if (event.event == "train_paused") {
          const auto step = util::json_number_field(event.fields_json, "step").value_or(0);
          for (auto& waiter : st.pause_waiters) waiter.deliver(static_cast<std::int64_t>(step));
          st.pause_waiters.clear();
        } else if (event.event == "checkpoint_now" && !st.checkpoint_waiters.empty()) {
          const int groups = static_cast<int>(st.setup.config.cluster.gpus_per_node);
          if (++st.checkpoint_reports < groups) return;
          st.checkpoint_reports = 0;
          const auto step = util::json_number_field(event.fields_json, "step").value_or(0);
          const bool committed = event.fields_json.find("\"committed\":true") != std::string::npos;
          for (auto& waiter : st.checkpoint_waiters.front()) {
            if (committed) waiter.deliver(static_cast<std::int64_t>(step));
            else waiter.deliver(make_error(node_errc::checkpoint_failed));
          }
          st.checkpoint_waiters.pop_front();
        }
      },
      // crash_actor "node": the exception handler above takes the tree down with it.
      [self](crash_atom) { crash_now("node", crash_requests_of(self->state.setup.config)); },
      [self](node_tick_atom) { on_tick(self); },
      [self](members_poll_atom) { poll_members(self); },
      // Every worker group (one per local rank) reports its training's end; the node is
      // done when all did, and fails when one failed.
      [self](job_finished& result) {
        auto& st = self->state;
        if (st.now != phase::running || st.awaiting_supervisor_down) return;
        const int groups = static_cast<int>(st.setup.config.cluster.gpus_per_node);
        const bool finished = ++st.finished_groups == groups || !result.ok;
        if (!result.ok) st.failure = result.error;
        st.permanent = st.permanent || (!result.ok && result.permanent);
        // (An evicted node that hosts the coordinator finishes the job without training.)
        st.evicted = st.evicted || result.evicted;
        if (st.params_sha256.empty()) st.params_sha256 = result.params_sha256;
        st.steps = std::max(st.steps, result.steps_done);
        // The job's stop vote can end this node's training before the timer polls the
        // node's own stop flag (the launcher signals every node at once).
        if (stop_flag_set(st)) st.signalled = true;
        // Nobody asked the node supervisor to stop yet: a worker it shut down means the
        // supervisor is stopping on its own (its restart intensity was exceeded). That is
        // the node failing, not the job finishing: wait (<= 10 s) for the supervisor's
        // down message to say why.
        if (result.ok && result.shut_down_by_supervisor && !st.signalled) {
          st.awaiting_supervisor_down = true;
          st.deadline = clock::now() + 10s;
          return;
        }
        if (finished || !st.failure.empty()) end_running(self);
      },
      [self](join_refused& refused) {
        auto& st = self->state;
        if (st.now != phase::running || st.awaiting_supervisor_down) return;
        st.failure = "the coordinator at " + refused.coordinator + " refused this node: " +
                     refused.reason;
        end_running(self);
      },
      [self](agent_event& event) {
        auto& st = self->state;
        if (st.now != phase::running || st.awaiting_supervisor_down) return;
        st.failure = event.reason;
        end_running(self);
      },
  };
}

}  // namespace

void register_node_types(caf::actor_system_config& cfg, const config::ClusterConfig& cluster) {
  register_message_types(cfg);
  cfg.load<caf::io::middleman>();
  if (!cluster.tls_ca.empty()) {
    cfg.load<caf::openssl::manager>();
    cfg.openssl_cafile = cluster.tls_ca;
    cfg.openssl_certificate = cluster.tls_cert;
    cfg.openssl_key = cluster.tls_key;
  }
}

node_actor spawn_node(caf::actor_system& sys, const config::JobConfig& job_config,
                      const node_options& options) {
  config::JobConfig config = job_config;
  check_fault_targets(config.faults, config.cluster.gpus_per_node);
  check_data_plane_available(config);  // comm.backend = "nccl" needs a build with NCCL
  check_advertised_interface(config);
  resolve_job_secret(config);
  // Off loopback without TLS: refused, or warned about under cluster.plaintext = true.
  if (const std::string warning = check_transport_security(config.cluster); !warning.empty())
    std::fprintf(stderr, "dseek-node: %s\n", warning.c_str());
  const auto& cluster = config.cluster;
  if (!sys.has_middleman())
    throw config::ConfigError("the actor system has no middleman: call "
                              "dseek::actors::register_node_types(cfg, job.cluster) on its config");
  if (!cluster.tls_ca.empty() && !sys.has_openssl_manager())
    throw config::ConfigError("cluster.tls_ca is set but the actor system has no libcaf_openssl: "
                              "call dseek::actors::register_node_types(cfg, job.cluster) on its "
                              "config");
  if (!cluster.tls_ca.empty())
    if (const std::string problem = openssl_error_queue_guard_problem(); !problem.empty())
      throw config::ConfigError("cluster.tls_ca is set but " + problem);
  const auto node_start = clock::now();
  const bool runs_coordinator = cluster.node_id == cluster.coordinator_node;
  if (!parse_host_port(cluster.coordinator))
    throw config::ConfigError("cluster.coordinator: not host:port: " + cluster.coordinator);
  // libcaf_openssl reads these at the first connection and terminates the process on a
  // file it cannot load; check them now, with a message that names the file.
  if (!cluster.tls_ca.empty()) check_tls_files(cluster.tls_ca, cluster.tls_cert, cluster.tls_key);

  node_setup setup;
  setup.options = options;
  setup.options.subscribers.clear();  // in the fanout
  setup.node_start = node_start;
  setup.events = std::make_shared<metrics::EventLog>(options.run_dir, cluster.node_id);
  setup.fanout = std::make_shared<event_fanout>();
  for (const auto& subscriber : options.subscribers)
    if (subscriber) setup.fanout->add(subscriber);
  auto fanout = setup.fanout;
  setup.events->add_listener(
      [fanout](std::string_view event, std::string_view fields) { fanout->observe(event, fields); });
  auto& events = *setup.events;
  if (runs_coordinator && cluster.nodes > 1) say_recoveries(events);
  // Before the first event, so that the /metrics counters agree with the log.
  setup.metrics_endpoint = metrics::open_metrics_endpoint(config, options.run_dir, events);
  // A port in use fails this start here, as the config error it is (exit 3, which stops a
  // launched job), not later in the node supervisor, where it read as a failure worth
  // restarts and the launcher went on with fewer nodes and exit 0.
  if (setup.metrics_endpoint) setup.metrics_endpoint->close(setup.metrics_endpoint->open());
  setup.checkpoints = std::make_shared<CheckpointOutcomes>();
  setup.world = std::make_shared<WorldOutcome>(cluster.nodes, config.elastic.min_nodes);
  events.add_listener([checkpoints = setup.checkpoints, world = setup.world](
                          std::string_view event, std::string_view fields) {
    checkpoints->observe(event, fields);
    world->observe(event, fields);
  });
  metrics::attach_step_measures(events, config);  // the "measures" event, then every step's
  setup.trace = metrics::attach_node_trace(events, options.run_dir, cluster.node_id);
  setup.faults = std::make_shared<FaultPlan>(config.faults, cluster.node_id, options.incarnation);
  setup.fault_actions = std::make_shared<FaultActions>(sys, setup.events);
  setup.config = std::move(config);
  return caf::actor_cast<node_actor>(sys.spawn(node_main, std::move(setup)));
}

// -- errors ----------------------------------------------------------------------

std::string to_string(node_errc x) {
  switch (x) {
    case node_errc::invalid_subscriber: return "invalid_subscriber";
    case node_errc::already_stopping: return "already_stopping";
    case node_errc::job_failed: return "job_failed";
    case node_errc::not_running: return "not_running";
    case node_errc::ended: return "ended";
    case node_errc::not_paused: return "not_paused";
    case node_errc::no_checkpoints: return "no_checkpoints";
    case node_errc::checkpoint_failed: return "checkpoint_failed";
  }
  return "unknown node error";
}

caf::error make_error(node_errc x, caf::message context) {
  return caf::error{static_cast<std::uint8_t>(x), node_category, std::move(context)};
}

std::string render_node_error(std::uint8_t code, caf::atom_value, const caf::message& context) {
  std::string out = "node: " + to_string(static_cast<node_errc>(code));
  if (context.match_elements<std::int32_t, std::string>())
    out += ": exit code " + std::to_string(context.get_as<std::int32_t>(0)) +
           (context.get_as<std::string>(1).empty() ? "" : ": " + context.get_as<std::string>(1));
  return out;
}

void register_node_messages(caf::actor_system_config& cfg) {
  cfg.add_message_type<node_status>("dseek::actors::node_status");
  cfg.add_message_type<node_result>("dseek::actors::node_result");
  cfg.add_error_category(node_category, render_node_error);
}

}  // namespace dseek::actors
