// Implementation of worker.hpp.
#include "actors/node/worker.hpp"

#include <chrono>
#include <exception>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/faults/crash_request.hpp"
#include "actors/faults/fault_actions.hpp"
#include "actors/faults/fault_plan.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::actors {

namespace {

using done_atom = caf::atom_constant<caf::atom("dsdone")>;
using gate_atom = caf::atom_constant<caf::atom("dsgate")>;

// The training thread; destroying it stops the training at the next step boundary and
// waits for it (the actor's state owns it, so this happens however the actor ends).
struct training_thread {
  std::atomic<bool> stop{false};
  std::thread thread;
  ~training_thread() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
};

struct worker_state {
  worker_setup setup;
  std::unique_ptr<training_thread> training;
  bool stopping = false;
  caf::error stop_reason;
  static inline const char* name = "dseek.worker";
};

job_finished train(const worker_setup& setup, int starts, caf::actor_system& sys,
                   const std::atomic<bool>& stop) {
  config::JobConfig config = setup.config;
  if (starts > 1 && config.checkpoint.every_steps > 0) config.checkpoint.resume = "latest";
  train::RunOptions options;
  options.run_dir = setup.run_dir;
  options.stop = &stop;
  options.events = setup.events.get();
  auto faults = setup.faults;
  auto actions = setup.fault_actions;
  options.before_step = [&sys, faults, actions](int64_t step) {
    names::send_to(sys, names::health_monitor, step_progress{step, 0.0});
    for (const auto& fault : faults->due_at_step(step))
      actions->fire(fault, "step " + std::to_string(step));
    if (const int64_t ms = actions->slow_ms(); ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  job_finished result;
  try {
    const auto summary = train::run_training(config, options);
    result.stopped_early = summary.stopped_early;
    result.steps_done = summary.steps_done;
    result.params_sha256 = summary.params_sha256;
  } catch (const std::exception& error) {
    result.ok = false;
    result.error = error.what();
  }
  return result;
}

void start_training(caf::stateful_actor<worker_state>* self, const epoch_started& epoch) {
  auto& st = self->state;
  const int starts = st.setup.starts->load();
  st.setup.events->emit("worker_started",
                        util::JsonLine().add("epoch", epoch.epoch)
                            .add("world_size", static_cast<int64_t>(epoch.world_size))
                            .add("start", static_cast<int64_t>(starts)));
  st.training = std::make_unique<training_thread>();
  auto* training = st.training.get();
  auto me = caf::actor_cast<caf::actor>(self);
  auto& sys = self->system();
  training->thread = std::thread([setup = st.setup, starts, &sys, training, me] {
    caf::anon_send(me, done_atom::value, train(setup, starts, sys, training->stop));
  });
}

std::string missing_nodes(const epoch_started& epoch, int64_t nodes) {
  std::string missing;
  for (int64_t id = 0; id < nodes; ++id) {
    bool present = false;
    for (const auto& m : epoch.members) present = present || m.node_id == id;
    if (!present) missing += (missing.empty() ? "" : ", ") + std::to_string(id);
  }
  return missing;
}

caf::behavior worker(caf::stateful_actor<worker_state>* self, worker_setup setup) {
  auto& st = self->state;
  st.setup = std::move(setup);
  ++*st.setup.starts;
  names::register_as(self, names::worker);
  const auto& cluster = st.setup.config.cluster;
  auto on_epoch = [self](const epoch_started& epoch) {
    auto& s = self->state;
    if (s.training || s.stopping) return;
    if (epoch.world_size >= s.setup.config.cluster.nodes) start_training(self, epoch);
  };
  self->request(st.setup.router, std::chrono::seconds(10), caf::get_atom::value)
      .then([on_epoch](const epoch_started& epoch) { on_epoch(epoch); });
  self->delayed_send(self, std::chrono::milliseconds(static_cast<int64_t>(cluster.start_timeout_s * 1000)),
                     gate_atom::value);
  self->set_exit_handler([self](caf::exit_msg& em) {
    auto& s = self->state;
    const bool orderly = em.reason == caf::exit_reason::user_shutdown ||
                         em.reason == caf::exit_reason::normal;
    if (!orderly || !s.training) {
      self->quit(em.reason);
      return;
    }
    // Let the training reach its step boundary and write its final checkpoint.
    s.stopping = true;
    s.stop_reason = em.reason;
    s.training->stop = true;
  });
  return {
      [on_epoch](const epoch_started& epoch) { on_epoch(epoch); },
      [](const node_lost&) {
        // Independent replicas: a lost peer does not concern this node's training.
      },
      [self](gate_atom) {
        auto& s = self->state;
        if (s.training || s.stopping) return;
        self->request(s.setup.router, std::chrono::seconds(5), caf::get_atom::value)
            .then([self](const epoch_started& epoch) {
              auto& s2 = self->state;
              if (s2.training) return;
              job_finished failed;
              failed.ok = false;
              failed.error = "the job did not start: " + std::to_string(epoch.world_size) +
                             " of " + std::to_string(s2.setup.config.cluster.nodes) +
                             " nodes joined within cluster.start_timeout_s = " +
                             std::to_string(s2.setup.config.cluster.start_timeout_s) +
                             " s (missing node ids: " +
                             missing_nodes(epoch, s2.setup.config.cluster.nodes) + ")";
              caf::anon_send(s2.setup.node_main, failed);
              self->quit();
            });
      },
      [self](done_atom, job_finished& result) {
        auto& s = self->state;
        if (s.training && s.training->thread.joinable()) s.training->thread.join();
        caf::anon_send(s.setup.node_main, std::move(result));
        self->quit(s.stopping ? s.stop_reason : caf::error{});
      },
      [](crash_atom) { crash_now("worker"); },
  };
}

}  // namespace

caf::actor spawn_worker(caf::actor_system& sys, const worker_setup& setup) {
  return sys.spawn(worker, setup);
}

}  // namespace dseek::actors
