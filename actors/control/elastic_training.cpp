// Implementation of elastic_training.hpp.
#include "actors/control/elastic_training.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include "actors/faults/fault_actions.hpp"
#include "actors/faults/fault_plan.hpp"
#include "actors/control/data_plane_link.hpp"
#include "actors/node/node_registry.hpp"
#include "actors/worker_group/worker_restart.hpp"
#include "actors/control/retired_communicators.hpp"
#include "actors/control/world_policy.hpp"
#include "dist/peer_shard_replica.hpp"
#include "dist/run_data_parallel.hpp"
#include "dist/sharded_state_sync.hpp"
#include "dist/state_sync.hpp"
#include "comm/types.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::actors {

namespace {

using Clock = WorldClock;

// Keeps `communicator` (and the epoch's NCCL `device` one, if any) registered with the
// board while it lives, however the scope ends (an exception out of the training must
// not leave the board a dangling pointer). When the training leaves by an exception, the
// communicators are aborted: an orderly teardown (a barrier with the peers) would wait
// for peers that are still mid-step.
class BoardRegistration {
 public:
  BoardRegistration(EpochBoard& board, comm::Communicator* communicator,
                    comm::Communicator* device, std::uint64_t epoch)
      : board_(board), communicator_(communicator), device_(device),
        exceptions_(std::uncaught_exceptions()) {
    board_.attach(communicator, epoch, nullptr, device);
  }
  ~BoardRegistration() {
    board_.attach(nullptr, 0);
    if (std::uncaught_exceptions() > exceptions_) {
      communicator_->abort("this replica's training failed");
      if (device_ != nullptr) device_->abort("this replica's training failed");
    }
  }
  BoardRegistration(const BoardRegistration&) = delete;
  BoardRegistration& operator=(const BoardRegistration&) = delete;

 private:
  EpochBoard& board_;
  comm::Communicator* communicator_;
  comm::Communicator* device_;
  int exceptions_;
};

// The state this epoch starts from, agreed by the ranks (state_sync.hpp under ZeRO 0,
// sharded_state_sync.hpp under ZeRO >= 1 with elastic.shard_replica).
struct AgreedState {
  int64_t steps_done = -1;
  bool from_peer = false;
  std::string why_not_memory;  // why a recovery goes to disk ("" when it does not)
};

AgreedState agree_on_state(const config::JobConfig& config, comm::Communicator& communicator,
                           train::TrainingState& replica, size_t param_count) {
  AgreedState agreed;
  if (config.parallel.zero == 0) {
    const dist::StateAgreement shared = dist::share_freshest_state(communicator, replica, param_count);
    agreed.steps_done = shared.steps_done;
    agreed.from_peer = shared.received;
  } else if (config.elastic.shard_replica) {
    const dist::ShardedStateAgreement rebuilt = dist::rebuild_sharded_state(communicator, replica, param_count);
    agreed.steps_done = rebuilt.steps_done;
    agreed.from_peer = rebuilt.from_peer;
    agreed.why_not_memory = rebuilt.unrecoverable;
  } else {
    agreed.why_not_memory = "elastic.shard_replica = false: under parallel.zero = " +
                            std::to_string(config.parallel.zero) +
                            " no node holds a lost node's optimizer shard";
  }
  if (agreed.steps_done < 0 && agreed.why_not_memory.empty())
    agreed.why_not_memory = "no node of this world holds a completed step in memory";
  return agreed;
}

// Faults that act in the step through the trainer's after-reduction hook
// (FaultActions::in_step): a slowed step and a corrupted gradient.
bool injects_into_gradients(const config::JobConfig& config) {
  for (const auto& fault : config.faults)
    if (fault.kind == config::FaultKind::slow || fault.kind == config::FaultKind::corrupt_gradient) return true;
  return false;
}

// After the first exchange of an epoch and after the job's last step: what the peer
// replica costs this node (bytes, memory, and the exchange's time: the last one's and
// the mean over the steps this epoch kept).
void report_peer_replica(metrics::EventLog& events, const dist::PeerShardReplica& kept,
                         const epoch_started& epoch) {
  const dist::PeerReplicaFootprint footprint = kept.footprint();
  events.emit("peer_replica",
              util::JsonLine().add("epoch", epoch.epoch)
                  .add("world_size", static_cast<int64_t>(epoch.world_size))
                  .add("holds_rank", footprint.holds_rank)
                  .add("replica_bytes", footprint.replica_bytes)
                  .add("own_bytes", footprint.own_bytes)
                  .add("state_bytes", footprint.state_bytes)
                  .add("steps_kept", kept.steps_kept())
                  .add("exchange_ms", kept.last_exchange_ms())
                  .add("mean_exchange_ms", kept.mean_exchange_ms()));
}

}  // namespace

job_finished run_elastic_training(const worker_setup& setup, int starts, caf::actor_system& sys,
                                  EpochBoard& board, const std::atomic<bool>& stop) {
  const auto& config = setup.config;
  train::TrainingState& replica = *setup.replica;
  const size_t param_count = model::ParamLayout(train::shape_of(config.model)).total();
  // ZeRO 0: every replica holds the whole state. ZeRO >= 1: its own shard plus a replica
  // of its ring neighbour's (peer_shard_replica.hpp), unless elastic.shard_replica is off.
  const bool keeps_memory_state = config.parallel.zero == 0;
  const bool keeps_shard_replica = config.parallel.zero > 0 && config.elastic.shard_replica;
  auto& events = *setup.events;

  WorldPolicy policy{config, starts == 1 && setup.incarnation == 0, 0, 0, Clock::now()};
  bool recovering = !policy.first;  // a restarted node or worker recovers too
  if (starts > 1) {
    if (auto fresh = announce_worker_restart(sys, config)) policy.accept_from(*fresh);
  }
  const auto node_start = Clock::now();
  job_finished result;
  RetiredCommunicators retired;
  while (true) {
    if (stop.load()) {
      result.stopped_early = true;
      return result;
    }
    const auto waited_from = recovering ? policy.failed_at : node_start;
    const auto limit = policy.wait_limit(waited_from);
    auto epoch = board.wait_for([&](const epoch_started& e) { return policy.accepts(e); }, limit);
    if (!epoch) {
      if (stop.load()) {
        result.stopped_early = true;
        return result;
      }
      const auto latest = board.latest();
      result.ok = false;
      result.error = (policy.first ? std::string("the job did not start: ")
                                   : std::string("the job could not continue: ")) +
                     std::to_string(latest.world_size) + " of " +
                     std::to_string(config.cluster.nodes) + " nodes are members (need " +
                     std::to_string(policy.first ? config.cluster.nodes : config.elastic.min_nodes) +
                     ") after waiting " +
                     std::to_string(static_cast<int64_t>(ms_since(waited_from) / 1000)) + " s";
      return result;
    }
    std::unique_ptr<comm::Communicator> communicator;
    std::unique_ptr<comm::Communicator> device_communicator;  // comm.backend = "nccl"
    auto report_interruption = [&](const std::exception& error) {
      events.emit("training_interrupted",
                  util::JsonLine().add("epoch", epoch->epoch).add("error", error.what())
                      .add("last_step", replica.steps_done));
    };
    try {
      EpochDataPlanes planes = connect_data_planes(sys, *epoch, config, setup.local_rank);
      communicator = std::move(planes.host);
      device_communicator = std::move(planes.device);
      BoardRegistration registration(board, communicator.get(), device_communicator.get(),
                                     epoch->epoch);
      const AgreedState agreement = agree_on_state(config, *communicator, replica, param_count);

      config::JobConfig session = config;
      const int rank = communicator->rank();
      if (rank != 0) session.metrics.progress = config::Progress::off;  // one progress display per job
      std::string source = agreement.from_peer ? "peer" : "memory";
      if (agreement.steps_done < 0 && recovering) {
        source = "disk";
        if (session.checkpoint.every_steps > 0 && session.checkpoint.resume.empty())
          session.checkpoint.resume = "latest";
      }
      // The layout of the ranks over the nodes, once per world (by its rank 0).
      if (rank == 0)
        std::fprintf(stderr, "dseek-node: epoch %llu: %d ranks on %d node(s): %s\n",
                     static_cast<unsigned long long>(epoch->epoch), communicator->size(),
                     epoch->world_size, rank_layout(*epoch).c_str());
      events.emit("worker_started",
                  util::JsonLine().add("epoch", epoch->epoch)
                      .add("world_size", static_cast<int64_t>(epoch->world_size))
                      .add("rank", static_cast<int64_t>(rank))
                      .add("ranks", static_cast<int64_t>(communicator->size()))
                      .add("local_rank", static_cast<int64_t>(setup.local_rank))
                      .add("state_step", agreement.steps_done).add("state_source", source));

      train::RunOptions options = node_run_options(setup, sys, stop);
      options.start_from = agreement.steps_done >= 0 ? &replica : nullptr;
      // The fault hook edits host gradients: with the gradients on the GPU (nccl) it
      // costs a copy down and up every step, so only a job that injects there keeps it.
      if (device_communicator && !injects_into_gradients(config)) options.after_reduction = nullptr;
      // With the gradients reduced on the GPU, AdamW runs there too (the trainer's own
      // optimizer) instead of in the CPU-offloaded gradient_shard actors, which would
      // copy the reduced gradient down and the parameters up every step.
      if (device_communicator) options.optimizer_shards = nullptr;
      const auto failed_at = policy.failed_at;
      const int64_t from_step = agreement.steps_done >= 0 ? agreement.steps_done : 0;
      const std::string why_disk = source == "disk" ? agreement.why_not_memory : std::string();
      dist::ReducerSettings settings = dist::reducer_settings(session);
      std::unique_ptr<dist::PeerShardReplica> shard_replica;
      if (keeps_shard_replica)
        shard_replica =
            std::make_unique<dist::PeerShardReplica>(*communicator, replica, settings.bucket_bytes,
                                               static_cast<int>(config.cluster.gpus_per_node));
      const int64_t last_step = config.train.steps;
      options.after_step = [&recovering, &replica, &events, &shard_replica, keeps_memory_state,
                            param_count, epoch, failed_at, from_step, source, why_disk,
                            last_step](int64_t steps_done, train::Trainer& trainer) {
        if (shard_replica) {
          shard_replica->after_step(steps_done, trainer);
          if (shard_replica->steps_kept() == 1 || steps_done == last_step)
            report_peer_replica(events, *shard_replica, *epoch);
        }
        if (keeps_memory_state) {
          replica.params.resize(param_count);
          replica.adam_m.resize(param_count);
          replica.adam_v.resize(param_count);
          trainer.snapshot(replica.params.data(), replica.adam_m.data(), replica.adam_v.data());
          replica.optimizer_steps = trainer.optimizer_steps();
          replica.steps_done = steps_done;
        }
        if (recovering) {
          recovering = false;
          // From disk, the step the run resumed at is known only inside run_training (the
          // newest checkpoint it loaded): this is the first step completed after it.
          // (from_step is 0 there, which reported every disk recovery as from step 0.)
          const int64_t resumed_at = source == "disk" ? steps_done - 1 : from_step;
          util::JsonLine fields;
          fields.add("from_step", resumed_at).add("source", source)
              .add("recovery_ms", ms_since(failed_at)).add("epoch", epoch->epoch)
              .add("world_size", static_cast<int64_t>(epoch->world_size));
          if (!why_disk.empty()) fields.add("reason", why_disk);
          events.emit("recovered", fields);
        }
      };
      // The gradients go over NCCL when the epoch has it (settings.backend_memory).
      const auto summary = dist::run_data_parallel(
          session, options, device_communicator ? *device_communicator : *communicator, settings);
      result.stopped_early = summary.stopped_early;
      result.steps_done = summary.steps_done;
      result.params_sha256 = summary.params_sha256;
      return result;
    } catch (const comm::CommError& error) {
      report_interruption(error);
      // This epoch's world is broken for every rank: wait for a later one.
      policy.after_epoch = epoch->epoch;
      policy.after_coordinator = epoch->coordinator_id;
    } catch (const rendezvous_failed& error) {
      report_interruption(error);
      // The exchange did not complete (the epoch moved on, or this node's agent was
      // being replaced): try again with whatever epoch is current, the same one included.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    retired.retire(std::move(device_communicator));
    retired.retire(std::move(communicator));
    if (!recovering) {
      recovering = true;
      policy.failed_at = Clock::now();
    }
    policy.first = false;
  }
}

}  // namespace dseek::actors
