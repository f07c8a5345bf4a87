// Implementation of replica_memory.hpp.
#include "dist/replica_memory.hpp"

#include <string>

#include "dist/sharded_state_sync.hpp"
#include "dist/state_sync.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::dist {

ReplicaMemory::ReplicaMemory(const config::JobConfig& config, comm::Communicator& host,
                             train::TrainingState& state, size_t bucket_bytes,
                             metrics::EventLog* events)
    : config_(config), host_(host), state_(state), events_(events),
      param_count_(model::ParamLayout(train::shape_of(config.model)).total()) {
  if (config.parallel.zero > 0 && config.elastic.shard_replica)
    shard_replica_ = std::make_unique<PeerShardReplica>(
        host, state, bucket_bytes, static_cast<int>(config.cluster.gpus_per_node));
}

train::MemoryRecovery ReplicaMemory::agree() {
  train::MemoryRecovery agreed;
  if (config_.parallel.zero == 0) {
    const StateAgreement shared = share_freshest_state(host_, state_, param_count_);
    agreed.steps_done = shared.steps_done;
    agreed.from_peer = shared.received;
  } else if (config_.elastic.shard_replica) {
    const ShardedStateAgreement rebuilt = rebuild_sharded_state(host_, state_, param_count_);
    agreed.steps_done = rebuilt.steps_done;
    agreed.from_peer = rebuilt.from_peer;
    agreed.why_not = rebuilt.unrecoverable;
  } else {
    agreed.why_not = "elastic.shard_replica = false: under parallel.zero = " +
                     std::to_string(config_.parallel.zero) +
                     " no node holds a lost node's optimizer shard";
  }
  if (agreed.steps_done < 0 && agreed.why_not.empty())
    agreed.why_not = "no node of this world holds a completed step in memory";
  return agreed;
}

void ReplicaMemory::after_step(int64_t steps_done, train::Trainer& trainer) {
  if (shard_replica_) {
    shard_replica_->after_step(steps_done, trainer);
    if (events_ != nullptr &&
        (shard_replica_->steps_kept() == 1 || steps_done == config_.train.steps)) {
      const PeerReplicaFootprint footprint = shard_replica_->footprint();
      events_->emit("peer_replica",
                    util::JsonLine().add("epoch", host_.epoch())
                        .add("world_size", static_cast<int64_t>(host_.size()))
                        .add("holds_rank", footprint.holds_rank)
                        .add("replica_bytes", footprint.replica_bytes)
                        .add("own_bytes", footprint.own_bytes)
                        .add("state_bytes", footprint.state_bytes)
                        .add("steps_kept", shard_replica_->steps_kept())
                        .add("exchange_ms", shard_replica_->last_exchange_ms())
                        .add("mean_exchange_ms", shard_replica_->mean_exchange_ms()));
    }
    return;
  }
  if (config_.parallel.zero != 0) return;
  state_.params.resize(param_count_);
  state_.adam_m.resize(param_count_);
  state_.adam_v.resize(param_count_);
  trainer.snapshot(state_.params.data(), state_.adam_m.data(), state_.adam_v.data());
  state_.optimizer_steps = trainer.optimizer_steps();
  state_.steps_done = steps_done;
}

}  // namespace dseek::dist
