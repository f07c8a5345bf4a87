// Implementation of epoch_loop.hpp.
#include "actors/control/epoch_loop.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include "actors/control/connect_retry.hpp"
#include "actors/control/data_plane_link.hpp"
#include "actors/control/layout_placement.hpp"
#include "actors/control/world_policy.hpp"
#include "actors/faults/fault_actions.hpp"
#include "actors/node/node_registry.hpp"
#include "comm/types.hpp"
#include "dist/run_layout.hpp"
#include "dist/trace_collectives.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/train/layout/survivor_layout.hpp"
#include "runtime/train/sdc_audit.hpp"
#include "runtime/train/state/memory_recovery.hpp"
#include "runtime/train/state/stage_memory.hpp"

namespace dseek::actors {

namespace {

// Aborts an epoch's communicators (null ones skipped): their orderly teardown would wait
// for peers that are gone.
void abort_planes(comm::Communicator* host, comm::Communicator* device, const std::string& why) {
  if (host) host->abort(why);
  if (device) device->abort(why);
}

// Keeps an epoch's communicators registered with the node's EpochBoard while the
// training runs over them (the board aborts them when a node is lost, so a collective
// blocked on a dead peer returns at once, or sets the step-boundary flag when a node
// joins), and unregisters them however the scope ends. When the training leaves by an
// exception, the communicators are aborted: an orderly teardown (a barrier with the
// peers) would wait for peers that are still mid-step.
class BoardAttachment {
 public:
  // `stop_at_step_boundary` and `companion` (the epoch's NCCL communicator): see
  // EpochBoard::attach.
  BoardAttachment(EpochBoard& board, comm::Communicator* communicator, std::uint64_t epoch,
                  std::atomic<bool>* stop_at_step_boundary, comm::Communicator* companion)
      : board_(board), communicator_(communicator), companion_(companion),
        exceptions_(std::uncaught_exceptions()) {
    board_.attach(communicator, epoch, stop_at_step_boundary, companion);
  }
  ~BoardAttachment() {
    board_.attach(nullptr, 0);
    if (std::uncaught_exceptions() > exceptions_)
      abort_planes(communicator_, companion_, "this rank's training failed");
  }
  BoardAttachment(const BoardAttachment&) = delete;
  BoardAttachment& operator=(const BoardAttachment&) = delete;

 private:
  EpochBoard& board_;
  comm::Communicator* communicator_;
  comm::Communicator* companion_;
  int exceptions_;
};

// Communicators of an epoch that failed, torn down on the side: a failed one can take
// seconds to tear down (its transfers to a hung peer are given up after a bounded wait),
// and the next world is built meanwhile. The destructor waits for every teardown.
class RetiredCommunicators {
 public:
  RetiredCommunicators() = default;
  RetiredCommunicators(const RetiredCommunicators&) = delete;
  RetiredCommunicators& operator=(const RetiredCommunicators&) = delete;
  ~RetiredCommunicators() {
    for (auto& thread : threads_) thread.join();
  }
  void retire(std::unique_ptr<comm::Communicator> communicator) {
    if (communicator)
      threads_.emplace_back([dead = std::move(communicator)]() mutable { dead.reset(); });
  }

 private:
  std::vector<std::thread> threads_;
};

// Asks the coordinator, through the node's agent (names::membership), for an epoch with
// `request`, bounded by cluster.connect_timeout_ms. Returns its answer, or nullopt with a
// line on stderr: "dseek-node: <no_agent>" without an agent (nothing when `no_agent` is
// empty), "dseek-node: <failed>: <error>" when the request failed.
template <class... Ts>
std::optional<epoch_started> ask_agent(caf::actor_system& sys, const config::JobConfig& config,
                                       const std::string& no_agent, const std::string& failed,
                                       const Ts&... request) {
  const auto agent = names::lookup(sys, names::membership);
  if (!agent) {
    if (!no_agent.empty()) std::fprintf(stderr, "dseek-node: %s\n", no_agent.c_str());
    return std::nullopt;
  }
  std::optional<epoch_started> answer;
  caf::scoped_actor self{sys};
  self->request(agent, std::chrono::milliseconds(config.cluster.connect_timeout_ms), request...)
      .receive([&](epoch_started& epoch) { answer = std::move(epoch); },
               [&](caf::error& error) {
                 std::fprintf(stderr, "dseek-node: %s: %s\n", failed.c_str(),
                              sys.render(error).c_str());
               });
  return answer;
}

// A data-parallel job: its replicas are the world's ranks (parallel.data stays 1).
bool data_parallel_job(const config::JobConfig& config) {
  return config.parallel.pipeline == 1 && config.parallel.tensor == 1;
}

// The layout of `epoch`'s ranks: every member's worker groups (cluster.gpus_per_node a
// node), not its members.
train::SurvivorLayout layout_for(const config::JobConfig& config, const epoch_started& epoch) {
  const int ranks = ranks_in_plan(epoch);
  const int data = data_parallel_job(config) ? ranks : static_cast<int>(config.parallel.data);
  return train::plan_survivor_layout(
      ranks, data, static_cast<int>(config.parallel.pipeline),
      static_cast<int>(config.parallel.tensor),
      [&config](const train::SurvivorLayout& layout) {
        return train::layout_refusal(config, layout);
      });
}

util::JsonLine& add_layout(util::JsonLine& fields, const train::SurvivorLayout& layout) {
  return fields.add("data", static_cast<int64_t>(layout.data))
      .add("pipeline", static_cast<int64_t>(layout.pipeline))
      .add("tensor", static_cast<int64_t>(layout.tensor));
}

// "node K finished the job" once a member left after its training ended (an orderly
// leave: the layout's ranks reached the last step, or the job was stopped); "" before.
// The coordinator announces that leave before the epoch without the node.
// A worker group of this node that trained to the job's end counts too: with several a
// node, the layout's ranks may all be this node's, which leaves only when all its groups
// are done.
std::string job_ended_by(const EpochBoard& board, const std::atomic<bool>& local_job_done) {
  const auto finished = board.finished_members();
  if (!finished.empty()) return "node " + std::to_string(finished.front()) + " finished the job";
  if (local_job_done.load()) return "a worker group of this node finished the job";
  return "";
}

// Waits for an epoch `policy` accepts (returned), until `limit` (nullopt), a stop
// (nullopt) or the job's end (nullopt with `ended_by` set: a node that stands by, or
// whose layout was left, has nothing more to train once a member finished).
std::optional<epoch_started> wait_for_world(EpochBoard& board, const WorldPolicy& policy,
                                            const std::atomic<bool>& stop,
                                            const std::atomic<bool>& local_job_done,
                                            WorldClock::time_point limit, std::string& ended_by) {
  while (!stop.load()) {
    const auto now = WorldClock::now();
    if (now >= limit) break;
    auto next = board.wait_for([&](const epoch_started& e) { return policy.accepts(e); },
                               std::min(limit, now + std::chrono::milliseconds(200)));
    ended_by = job_ended_by(board, local_job_done);
    if (!ended_by.empty()) return std::nullopt;
    if (next) return next;
  }
  return std::nullopt;
}

// Why the wait for a world ended without one.
std::string no_world(const config::JobConfig& config, const WorldPolicy& policy,
                     const epoch_started& latest, WorldClock::time_point waited_from) {
  return std::string(policy.first ? "the job did not start: " : "the job could not continue: ") +
         std::to_string(latest.world_size) + " of " + std::to_string(config.cluster.nodes) +
         " nodes are members (need " +
         std::to_string(policy.first ? config.cluster.nodes : config.elastic.min_nodes) +
         ") after waiting " +
         std::to_string(static_cast<int64_t>(ms_since(waited_from) / 1000)) + " s";
}

// Whether a run that stopped early reached the job's own limit (train.stop_after_steps,
// train.stop_after_minutes) rather than a vote to leave the layout or a signal.
bool job_limit_reached(const config::TrainConfig& t, int64_t steps_run, double elapsed_s) {
  return (t.stop_after_steps > 0 && steps_run >= t.stop_after_steps) ||
         (t.stop_after_minutes > 0 && elapsed_s >= t.stop_after_minutes * 60);
}

// The checkpoint a recovery resumes from when no step is in the ranks' memory. Returns
// why the job starts over instead ("" when it resumes from the newest periodic
// checkpoint).
std::string resume_after_failure(config::JobConfig& session) {
  if (session.checkpoint.every_steps > 0) {
    session.checkpoint.resume = "latest";
    return "";
  }
  if (!session.checkpoint.resume.empty())
    return "checkpoint.every_steps = 0: the job starts again from checkpoint.resume = \"" +
           session.checkpoint.resume + "\"";
  return "checkpoint.every_steps = 0: the job starts again from step 0";
}

// A pipeline or tensor-parallel layout that can resume from memory takes its ranks by
// what each holds (train/layout/memory_placement.hpp): one more round of the epoch's
// rendezvous, in which every rank (standby ones too) says what it holds. Empty: the
// plan's order. Throws rendezvous_failed.
std::vector<int32_t> placement_by_memory(const worker_setup& setup, caf::actor_system& sys,
                                         const epoch_started& epoch,
                                         const train::SurvivorLayout& layout) {
  if ((layout.pipeline == 1 && layout.tensor == 1) ||
      !train::why_no_memory_recovery(setup.config).empty())
    return {};
  const auto payloads = exchange_in_rendezvous(
      sys, epoch, setup.config, setup.local_rank,
      train::encode_holdings(setup.stage_memory ? setup.stage_memory->holdings()
                                                : std::vector<train::StageHolding>{}));
  std::vector<std::vector<train::StageHolding>> holdings;
  for (const auto& payload : payloads) holdings.push_back(train::decode_holdings(payload));
  return train::place_by_memory(holdings, layout);
}

}  // namespace

job_finished run_epochs(const worker_setup& setup, caf::actor_system& sys, EpochBoard& board,
                        const std::atomic<bool>& stop) {
  const auto& config = setup.config;
  auto& events = *setup.events;
  const bool data_parallel = data_parallel_job(config);
  const int starts = setup.starts ? setup.starts->load() : 1;
  WorldPolicy policy{config, starts <= 1 && setup.incarnation == 0, 0, 0, WorldClock::now()};
  bool recovering = !policy.first;  // a restarted node recovers too
  // This rank stood by or its epoch ended: when it trains again, it recovers.
  const auto leave_epoch = [&] {
    if (!recovering) {
      recovering = true;
      policy.failed_at = WorldClock::now();
    }
    policy.first = false;
  };
  if (starts > 1) {
    // The worker group restarted after a crash in it (its worker, gradient_shard or
    // pipeline_stage): its data plane died with the old worker, and the peers are still
    // inside collectives with it. The coordinator starts a new epoch with the same
    // members (restarted_atom: node_lost "worker restarted: ..." first), which aborts
    // them, and every node re-plans from it.
    if (auto fresh = ask_agent(sys, config, "",
                               "the coordinator was not told of this node's restarted worker group",
                               restarted_atom::value, std::string("its worker group was restarted")))
      policy.accept_from(*fresh);
  }
  const auto node_start = WorldClock::now();
  job_finished result;
  RetiredCommunicators retired;
  ConnectRetries connect_retries;
  bool standing_by = false;
  // The SDC audit evicted this node, which hosts the coordinator: it stands by until the
  // job ends (see the SdcDetected handler below).
  bool out_of_training = false;
  while (true) {
    if (stop.load()) {
      result.stopped_early = true;
      return result;
    }
    const auto waited_from = recovering ? policy.failed_at : node_start;
    // A node that stands by waits as long as the job runs.
    const auto limit = standing_by ? WorldClock::time_point::max() : policy.wait_limit(waited_from);
    std::string ended_by;
    auto epoch = wait_for_world(board, policy, stop, *setup.local_job_done, limit, ended_by);
    if (!ended_by.empty()) {
      events.emit("standby_ended", util::JsonLine().add("reason", ended_by));
      result.evicted = out_of_training;
      return result;
    }
    if (!epoch) {
      result.stopped_early = stop.load();
      result.ok = result.stopped_early;
      if (!result.ok) result.error = no_world(config, policy, board.latest(), waited_from);
      return result;
    }
    const train::SurvivorLayout layout = layout_for(config, *epoch);
    const int32_t planned_rank = rank_in_plan(*epoch, config.cluster.node_id, setup.local_rank);
    std::vector<int32_t> order;
    try {
      order = placement_by_memory(setup, sys, *epoch, layout);
    } catch (const rendezvous_failed&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the epoch moved on
      continue;
    }
    // This rank's place in the layout (a standby rank keeps its plan rank in the events).
    bool trains = planned_rank < layout.ranks();
    int32_t rank = planned_rank;
    if (!order.empty()) {
      const auto at = std::find(order.begin(), order.end(), planned_rank);
      trains = at != order.end();
      if (trains) rank = static_cast<int32_t>(at - order.begin());
    }
    util::JsonLine planned;
    planned.add("epoch", epoch->epoch).add("world_size", static_cast<int64_t>(epoch->world_size));
    add_layout(planned, layout).add("ranks", static_cast<int64_t>(layout.ranks()))
        .add("rank", static_cast<int64_t>(rank)).add("local_rank", static_cast<int64_t>(setup.local_rank))
        .add("role", std::string(trains ? "train" : "standby"));
    events.emit("epoch_layout", planned);
    // Which node holds which ranks of the layout, once per epoch (by its rank 0).
    if (trains && rank == 0)
      std::fprintf(stderr, "dseek-node: epoch %llu: %s\n",
                   static_cast<unsigned long long>(epoch->epoch),
                   layout_placement(*epoch, layout, order).c_str());

    if (!trains) {
      try {
        exchange_in_rendezvous(sys, *epoch, config, setup.local_rank, "");  // no address
      } catch (const rendezvous_failed&) {
        // The epoch moved on meanwhile: plan again in the current one.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      std::fprintf(stderr,
                   "dseek-node: node %lld (local rank %d) stands by in epoch %llu: the layout "
                   "%s trains on ranks 0..%d of %d\n",
                   static_cast<long long>(config.cluster.node_id), setup.local_rank,
                   static_cast<unsigned long long>(epoch->epoch), train::describe(layout).c_str(),
                   layout.ranks() - 1, ranks_in_plan(*epoch));
      leave_epoch();
      policy.accept_after(*epoch);
      standing_by = true;
      continue;
    }
    standing_by = false;

    EpochDataPlanes planes;
    std::string error;
    bool connected = false;  // false: the failure came while connecting the data plane
    std::optional<std::pair<data_plane_unreachable, ConnectRetry>> unreachable;
    // Set when this rank asks the coordinator to re-plan the failed epoch (without that
    // node when >= 0), after `backoff`.
    std::optional<int64_t> replan_without;
    std::chrono::milliseconds backoff{0};
    // Set when a node joins (the layout may grow) or the node stops: the ranks finish
    // the step they are in, vote to stop, write the checkpoint of that step and leave
    // the layout together, with nothing in flight.
    std::atomic<bool> stop_at_step_boundary{false};
    // Any other exception (a lost pipeline_stage: the worker group restarts) leaves the
    // loop, the communicators aborted as it leaves the attachment.
    try {
      ConnectOptions connect;
      connect.ranks = layout.ranks();
      connect.local_rank = setup.local_rank;
      connect.order = order.empty() ? nullptr : &order;
      // While the ranks wire up, the board may abort the communicator (the epoch was
      // re-planned: a peer that failed to connect will not come).
      connect.while_connecting = [&board, number = epoch->epoch](comm::Communicator* building) {
        board.attach(building, number);
      };
      connect.fail_as_unreachable = setup.fault_actions && setup.fault_actions->take_connect_failure();
      connect.observer = dist::collective_spans(setup.trace);  // its operations in the node's trace
      planes = connect_data_planes(sys, *epoch, config, connect);
      connected = true;
      connect_retries.connected();
      BoardAttachment attachment(board, planes.host.get(), epoch->epoch, &stop_at_step_boundary,
                                 planes.device.get());
      if (stop.load()) stop_at_step_boundary = true;
      // A data-parallel job keeps its config (its replicas are the connected ranks).
      config::JobConfig session = data_parallel ? config : train::config_for_layout(config, layout);
      if (rank != 0) session.metrics.progress = config::Progress::off;  // one progress display per job
      // Where a recovery resumes when no step is in the ranks' memory: the newest
      // checkpoint, or the job's start.
      std::string fallback = "start";
      std::string starts_over;
      if (recovering) {
        starts_over = resume_after_failure(session);
        if (starts_over.empty()) fallback = "disk";
      }
      util::JsonLine started;
      started.add("epoch", epoch->epoch).add("world_size", static_cast<int64_t>(epoch->world_size))
          .add("rank", static_cast<int64_t>(rank)).add("ranks", static_cast<int64_t>(layout.ranks()))
          .add("local_rank", static_cast<int64_t>(setup.local_rank));
      events.emit("worker_started", add_layout(started, layout));

      train::RunOptions options = node_run_options(setup, sys, stop_at_step_boundary);
      options.stop_request = &stop;  // a join does not cut an evaluation short; a stop does
      // What the ranks keep in memory between epochs, and what they agreed on in this one.
      train::MemoryRecovery from_memory;
      options.memory_recovery = &from_memory;
      options.stage_memory = setup.stage_memory.get();
      int64_t first_step = -1;
      options.before_step = [inner = options.before_step, &first_step](int64_t step) {
        if (first_step < 0) first_step = step;
        if (inner) inner(step);
      };
      if (recovering) {
        // The step the run resumes at is known only inside it (the memory the ranks agree
        // on, or the checkpoint it loads): the first step it starts is that one.
        const auto failed_at = policy.failed_at;
        const auto world = epoch->world_size;
        const auto epoch_number = epoch->epoch;
        options.before_step = [inner = options.before_step, &recovering, &from_memory,
                               failed_at, world, epoch_number, layout, fallback, starts_over,
                               &events](int64_t step) {
          if (recovering) {
            recovering = false;  // a later failure is a recovery of its own
            const std::string source = from_memory.steps_done >= 0
                                           ? (from_memory.from_peer ? "peer" : "memory")
                                           : fallback;
            if (source == "start" && !starts_over.empty()) {
              events.emit("recovery_without_checkpoint",
                          util::JsonLine().add("epoch", epoch_number).add("reason", starts_over));
              std::fprintf(stderr, "dseek-node: warning: %s (set checkpoint.every_steps to "
                           "resume from the newest checkpoint after a node loss)\n",
                           starts_over.c_str());
            }
            util::JsonLine fields;
            fields.add("from_step", step).add("source", source)
                .add("recovery_ms", ms_since(failed_at)).add("epoch", epoch_number)
                .add("world_size", static_cast<int64_t>(world));
            if (from_memory.steps_done < 0 && !from_memory.why_not.empty())
              fields.add("reason", from_memory.why_not);
            events.emit("recovered", add_layout(fields, layout));
          }
          if (inner) inner(step);
        };
      }
      const train::RunSummary summary =
          dist::run_layout(session, options, *planes.host, dist::reducer_settings(session),
                           planes.device.get()).run;
      // Done, stopped by the job (a signal, train.stop_after_*), or left for a new layout.
      // A vote to stop that this node did not cast for its own stop is a peer's: a join it
      // heard of first (this node hears of it within moments), or a stop of the job (the
      // peer then leaves, and wait_for_world ends this node's wait).
      const int64_t steps_run = first_step < 0 ? 0 : summary.steps_done - first_step;
      if (!summary.stopped_early || stop.load() ||
          job_limit_reached(config.train, steps_run, summary.elapsed_s)) {
        result.stopped_early = summary.stopped_early;
        result.steps_done = summary.steps_done;
        result.params_sha256 = summary.params_sha256;
        setup.local_job_done->store(true);
        return result;
      }
      // A node joined: every rank of this layout stopped at the same step boundary (the
      // checkpoint of that step is written, when the job writes them). Plan again.
      events.emit("layout_left", util::JsonLine().add("epoch", epoch->epoch)
                                     .add("step", summary.steps_done)
                                     .add("reason", std::string("a node joined")));
    } catch (const train::SdcDetected& detected) {
      // The SDC audit found ranks computing wrong gradients; every rank threw before the
      // update. Their nodes leave for good; the others redo the step without them, as
      // after a node loss (the coordinator re-plans without the first one's node).
      const bool this_rank =
          std::find(detected.ranks.begin(), detected.ranks.end(), rank) != detected.ranks.end();
      std::vector<int64_t> nodes;
      std::string node_list;
      for (int bad : detected.ranks) {
        const int32_t bad_planned = order.empty() ? bad : order[static_cast<size_t>(bad)];
        nodes.push_back(node_of_rank(*epoch, bad_planned));
        node_list += (node_list.empty() ? "" : ",") + std::to_string(nodes.back());
      }
      util::JsonLine fields = train::sdc_audit_fields(detected, this_rank);
      events.emit("sdc_detected", fields.add("nodes", node_list).add("epoch", epoch->epoch));
      std::fprintf(stderr, "dseek-node: %s (node %s)\n", detected.what(), node_list.c_str());
      const bool this_node =
          std::find(nodes.begin(), nodes.end(), config.cluster.node_id) != nodes.end();
      if (this_node && config.cluster.node_id == config.cluster.coordinator_node) {
        // It coordinates the job (cluster.coordinator_node): with no coordinator failover,
        // leaving would end the job, so it stops training (every worker group of it) and
        // goes on coordinating. The coordinator is asked for a new epoch with no worker of
        // this node in its plan (retire_atom); the node's groups then stand by until the
        // job ends, and the node exits with exit_code::evicted after it.
        error = std::string(detected.what()) + ": this node hosts the coordinator; it no "
                "longer trains and coordinates until the job ends";
        std::fprintf(stderr, "dseek-node: %s\n", error.c_str());
        if (!ask_agent(sys, config, "no node agent to take this node out of training",
                       "the coordinator did not take this node out of training",
                       retire_atom::value, std::string(detected.what())))
          throw train::SdcEvicted(std::string(detected.what()) + ": this node leaves the job");
        out_of_training = standing_by = true;
        policy.accept_after(*epoch);
      } else if (this_rank) {
        abort_planes(planes.host.get(), planes.device.get(), "this node was evicted by the SDC audit");
        throw train::SdcEvicted(std::string(detected.what()) + ": this node leaves the job");
      } else {
        // The evicted node leaves (its departure re-plans the epoch, a moment after the
        // slowest rank has its verdict too; the coordinator's node re-plans without its
        // workers instead) and never comes back: no wait for a rejoin.
        error = detected.what();
        policy.accept_after(*epoch);
        policy.evicted += static_cast<int64_t>(nodes.size());
      }
    } catch (const data_plane_unreachable& failure) {
      // A peer this rank could not reach: the epoch failed; the coordinator re-plans it
      // (connect_retry.hpp), and the peers waiting in the connect are aborted by that.
      error = failure.what();
      policy.accept_after(*epoch);
      const ConnectRetry retry = connect_retries.failed(failure.node);
      unreachable.emplace(failure, retry);
      std::fprintf(stderr, "dseek-node: %s; %s\n", error.c_str(),
                   retry.drop_peer
                       ? ("node " + std::to_string(failure.node) + " was unreachable in " +
                          std::to_string(retry.attempt) + " epochs in a row: the coordinator "
                          "takes it for lost").c_str()
                       : ("the coordinator re-plans the epoch in " +
                          std::to_string(retry.backoff.count()) + " ms (attempt " +
                          std::to_string(retry.attempt) + " of " +
                          std::to_string(kConnectAttempts) + ")").c_str());
      replan_without = retry.drop_peer ? failure.node : -1;
      if (!retry.drop_peer) backoff = retry.backoff;
    } catch (const comm::CommError& failure) {
      error = failure.what();
      policy.accept_after(*epoch);  // this epoch's world is broken for every rank
      // Connecting failed otherwise (the peers did not all arrive within
      // comm.timeout_ms): unless the epoch already moved on, nobody else will start a
      // new one.
      const auto latest = board.latest();
      if (!connected && latest.epoch == epoch->epoch &&
          latest.coordinator_id == epoch->coordinator_id)
        replan_without = -1;
    } catch (const rendezvous_failed& failure) {
      error = failure.what();
      // The exchange did not complete (the epoch moved on): try again with whatever
      // epoch is current, the same one included.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (error.empty()) {
      // Left at a step boundary: the peers are there and nothing is in flight, so the
      // orderly teardown (a barrier with them) is quick. Only a later epoch will do.
      planes = {};
      policy.accept_after(*epoch);
    } else {
      util::JsonLine fields;
      fields.add("epoch", epoch->epoch).add("error", error);
      if (unreachable) {
        const auto& [failure, retry] = *unreachable;
        fields.add("peer_node", failure.node).add("peer_host", failure.host)
            .add("attempt", static_cast<int64_t>(retry.attempt))
            .add("action", std::string(retry.drop_peer ? "drop_peer" : "replan"));
      }
      events.emit("training_interrupted", fields);
      if (replan_without) {
        // A new epoch after this one failed (replan_atom; without that node when >= 0):
        // the coordinator's current one, unchanged when this epoch was no longer current.
        std::this_thread::sleep_for(backoff);
        const std::string after = "after epoch " + std::to_string(epoch->epoch);
        if (auto current = ask_agent(sys, config, "no node agent to ask for a new epoch " + after,
                                     "the coordinator was not asked for a new epoch " + after,
                                     replan_atom::value, epoch->epoch, *replan_without, error))
          board.post(*current);
      }
      abort_planes(planes.host.get(), planes.device.get(), "this rank's training failed");
      retired.retire(std::move(planes.device));
      retired.retire(std::move(planes.host));
    }
    leave_epoch();
  }
}

}  // namespace dseek::actors
