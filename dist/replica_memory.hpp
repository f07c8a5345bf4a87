// Recovery from memory in a data-parallel world: what each rank keeps of the last
// completed step, and how a new epoch's ranks agree on a state to go on from.
//
//   - ZeRO 0: every rank keeps the whole state (parameters and AdamW moments), identical
//     to its peers'; the world takes the freshest copy any rank holds (state_sync.hpp:
//     a rank without it, e.g. a restarted node, receives it).
//   - ZeRO >= 1 with elastic.shard_replica: each rank keeps its own optimizer shard and
//     its ring neighbour's (peer_shard_replica.hpp, exchanged after every step), and the
//     world puts the whole state back together from them (sharded_state_sync.hpp).
//   - Otherwise, or when no step can be rebuilt (two neighbours lost together), nothing
//     comes from memory, and the agreement says why: the run resumes from disk.
//
// Events: peer_replica (ZeRO >= 1: what the neighbour's shard costs, after the first
// step of the run and after the job's last step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/communicator.hpp"
#include "dist/peer_shard_replica.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/state/memory_recovery.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::metrics {
class EventLog;
}

namespace dseek::dist {

class ReplicaMemory {
 public:
  // `host`: the world's host-memory communicator (the state moves there, whatever the
  // gradients go over); `state`: the rank's kept state (outlives this object);
  // `bucket_bytes`: the reducer's (ZeRO shards are pieces of its buckets).
  ReplicaMemory(const config::JobConfig& config, comm::Communicator& host,
                train::TrainingState& state, size_t bucket_bytes, metrics::EventLog* events);

  // Collective over `host`: the step every rank now holds in `state` (steps_done -1: none,
  // with why_not). Throws comm::CommError when the data plane fails.
  train::MemoryRecovery agree();
  // After step `steps_done` completed: keeps it (collective with the ring neighbours
  // under ZeRO >= 1).
  void after_step(int64_t steps_done, train::Trainer& trainer);

 private:
  const config::JobConfig& config_;
  comm::Communicator& host_;
  train::TrainingState& state_;
  metrics::EventLog* events_;
  size_t param_count_;
  std::unique_ptr<PeerShardReplica> shard_replica_;  // ZeRO >= 1 with elastic.shard_replica
};

}  // namespace dseek::dist
