// Implementation of worker.hpp.
#include "actors/worker_group/worker.hpp"

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
#include "actors/node/checkpoint_writer.hpp"
#include "actors/node/data_prefetcher.hpp"
#include "actors/control/epoch_board.hpp"
#include "actors/control/epoch_loop.hpp"
#include "actors/worker_group/gradient_shard.hpp"
#include "actors/node/health_monitor.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/node_registry.hpp"
#include "actors/worker_group/pipeline_stage.hpp"
#include "runtime/util/failure_kind.hpp"
#include "gpu/backend_for_device.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/sdc_audit.hpp"
#include "runtime/train/step_control.hpp"

namespace dseek::actors {

namespace {

using done_atom = caf::atom_constant<caf::atom("dsdone")>;
using grace_atom = caf::atom_constant<caf::atom("dsgrace")>;

// An orderly stop lets the step in flight finish with the peers; if a collective does not
// come back within this (a peer that is gone without this node hearing of it), the
// communicator is aborted so that the stop cannot hang on it.
constexpr auto kStopGrace = std::chrono::seconds(5);

// The training thread; destroying it (the actor crashed or was killed) aborts its
// communicator, so that the peers recover without this replica, ends any wait for a
// world, and joins it. The actor's state owns it, so this happens however the actor ends.
struct training_thread {
  std::atomic<bool> stop{false};
  EpochBoard board;
  std::thread thread;
  ~training_thread() {
    // Abort before the stop flag: a step boundary that saw the flag first would have the
    // replicas vote to stop the whole job.
    board.close(/*abort=*/true);
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

// The single-node job: no data plane, no world to wait for.
job_finished train_alone(const worker_setup& setup, int starts, caf::actor_system& sys,
                         const std::atomic<bool>& stop) {
  config::JobConfig config = setup.config;
  // A restarted worker resumes from the newest checkpoint, if the job writes them.
  if (starts > 1 && config.checkpoint.every_steps > 0) config.checkpoint.resume = "latest";
  train::RunOptions options = node_run_options(setup, sys, stop);
  job_finished result;
  const auto summary = train::run_training(config, options);
  result.stopped_early = summary.stopped_early;
  result.steps_done = summary.steps_done;
  result.params_sha256 = summary.params_sha256;
  return result;
}

std::function<void(int64_t)> step_boundary(caf::actor_system& sys, const worker_setup& setup) {
  auto faults = setup.faults;
  auto actions = setup.fault_actions;
  return [&sys, faults, actions](int64_t step) {
    names::send_to(sys, names::health_monitor, step_progress{step, 0.0});
    for (const auto& fault : faults->due_at_step(step))
      actions->fire(fault, "step " + std::to_string(step));
    actions->sleep_if_slow();  // a `slow` node, from its step on
  };
}

void start_training(caf::stateful_actor<worker_state>* self) {
  auto& st = self->state;
  const int starts = st.setup.starts->load();
  st.training = std::make_unique<training_thread>();
  auto* training = st.training.get();
  auto me = caf::actor_cast<caf::actor>(self);
  auto& sys = self->system();
  training->thread = std::thread([setup = st.setup, starts, &sys, training, me] {
    job_finished result;
    try {
      // Several local ranks are a world even on one node: they train over the data
      // plane; so does a one-node job with comm.backend = "nccl" (its gradients over a
      // one-rank NCCL communicator, as in a bigger world).
      if (setup.config.cluster.nodes > 1 || setup.config.cluster.gpus_per_node > 1 ||
          setup.config.comm.backend == config::CommBackend::nccl)
        result = run_epochs(setup, sys, training->board, training->stop);
      else
        result = train_alone(setup, starts, sys, training->stop);
    } catch (const train::SdcEvicted& error) {
      result.ok = false;
      result.error = error.what();
      result.evicted = true;
    } catch (const std::exception& error) {
      result.ok = false;
      // A lost gradient_shard or pipeline_stage: the worker group is being restarted
      // (one_for_all), no failure of the job.
      if (dynamic_cast<const gradient_shard_lost*>(&error) ||
          dynamic_cast<const pipeline_stage_lost*>(&error)) {
        result.error = error.what();
        result.group_broken = true;
      } else {
        result.error = util::describe_failure(error);
        result.permanent = util::classify_failure(error).permanent;
      }
    }
    caf::anon_send(me, done_atom::value, std::move(result));
  });
}

caf::behavior worker(caf::stateful_actor<worker_state>* self, worker_setup setup) {
  auto& st = self->state;
  st.setup = std::move(setup);
  ++*st.setup.starts;
  names::register_as(self, names::worker_of(st.setup.local_rank));
  // The gradient_shards of this group hold the optimizer state the training updates: one
  // that goes down takes the worker with it at once (as a crash: the training aborts its
  // collectives), before its supervisor restarts the group.
  for (const auto& shard :
       running_gradient_shards(self->system(), gradient_shard_count(st.setup.config),
                               st.setup.local_rank))
    self->monitor(shard);
  // So does its pipeline_stage (a pipeline or tensor-parallel job's), which owns the
  // stage trainer.
  if (auto stage = names::lookup(self->system(), names::pipeline_stage_of(st.setup.local_rank)))
    self->monitor(stage);
  self->set_down_handler([self](caf::down_msg& down) { self->quit(down.reason); });
  start_training(self);
  // Epochs that came before this worker existed (or before a restart of it).
  self->request(st.setup.router, std::chrono::seconds(10), caf::get_atom::value)
      .then([self](const epoch_started& epoch) { self->state.training->board.post(epoch); });
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
    s.training->board.close(/*abort=*/false);
    self->delayed_send(self, kStopGrace, grace_atom::value);
  });
  return {
      [self](const epoch_started& epoch) { self->state.training->board.post(epoch); },
      [self](const node_lost& lost) {
        // A node that left after the job ended is no failure; any other loss is.
        if (lost.reason == "left") {
          self->state.training->board.member_finished(lost.lost_node);
          return;
        }
        // lost_node < 0: this node lost its coordinator (event_router.cpp).
        self->state.training->board.abort_before(
            lost.epoch, lost.lost_node < 0 ? lost.reason
                                           : "node " + std::to_string(lost.lost_node) + " lost (" +
                                                 lost.reason + ")");
      },
      [self](const node_joined& joined) {
        // A node that (re)joins while the world trains: take it in at the next step. This
        // node itself rejoining (it woke from a hang, or its membership actor restarted)
        // means its peers ended the world it trains in and aborted their collectives:
        // abort its own now, or a collective it is in waits out its timeout (30 s).
        const bool me = joined.rejoined &&
                        joined.node_id == self->state.setup.config.cluster.node_id;
        self->state.training->board.abort_before(
            joined.epoch,
            me ? "this node rejoined: its peers ended the world it trained in"
               : "node " + std::to_string(joined.node_id) + " joined",
            /*peers_alive=*/!me);
      },
      [self](done_atom, job_finished& result) {
        auto& s = self->state;
        if (s.training && s.training->thread.joinable()) s.training->thread.join();
        // A lost gradient_shard: the group restarts; the node's job goes on.
        if (result.group_broken) {
          self->quit(caf::make_error(caf::sec::runtime_error, result.error));
          return;
        }
        result.shut_down_by_supervisor = s.stopping;
        caf::anon_send(s.setup.node_main, std::move(result));
        self->quit(s.stopping ? s.stop_reason : caf::error{});
      },
      [self](grace_atom) {
        if (self->state.training) self->state.training->board.close(/*abort=*/true);
      },
      [self](crash_atom) { crash_now("worker", crash_requests_of(self->state.setup.config)); },
  };
}

}  // namespace

train::RunOptions node_run_options(const worker_setup& setup, caf::actor_system& sys,
                                   const std::atomic<bool>& stop) {
  train::RunOptions options;
  options.run_dir = setup.run_dir;
  options.stop = &stop;
  options.events = setup.events.get();
  options.trace = setup.trace;
  // At every step boundary (health progress, step faults), and inside every step on the
  // final gradients (slow, corrupt_gradient).
  options.before_step = step_boundary(sys, setup);
  options.after_reduction = [actions = setup.fault_actions](int64_t, float* grads, size_t count) {
    actions->corrupt_if_due(config::FaultWhere::reduced, grads, count);
  };
  options.control = setup.control.get();
  options.pause_changed = [&sys](bool paused, int64_t step) {
    names::send_to(sys, names::health_monitor, training_paused{step, paused});
  };
  if (auto actions = setup.fault_actions) {
    options.before_reduction = [actions](int64_t, float* grads, size_t count) {
      actions->corrupt_if_due(config::FaultWhere::local, grads, count);
    };
    options.in_recomputation = [actions](int64_t, float* grads, size_t count) {
      actions->corrupt_if_due(config::FaultWhere::audit, grads, count);
    };
  }
  // kill and hang with during = "reduction", in every layout's data group.
  auto plan = setup.faults;
  auto actions = setup.fault_actions;
  if (plan && actions)
    options.during_reduction = [plan, actions](int64_t step) {
      for (const auto& fault : plan->due_in_reduction(step))
        actions->fire(fault, "step " + std::to_string(step) + ", during the reduction");
    };
  options.checkpoint_sink = checkpoint_sink_for(sys);
  options.optimizer_shards =
      gradient_shards_for(sys, gradient_shard_count(setup.config), setup.local_rank);
  options.pipeline_stage = pipeline_stage_for(sys, setup.local_rank);
  options.backend = gpu::backend_for_device(setup.local_rank);
  options.batch_prefetcher = prefetcher_for(sys, std::chrono::seconds(2), setup.local_rank);
  options.report_disagreement = sdc_reporter(sys, setup.events);
  return options;
}

caf::actor spawn_worker(caf::actor_system& sys, const worker_setup& setup) {
  return sys.spawn(worker, setup);
}

}  // namespace dseek::actors
