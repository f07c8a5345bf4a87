// ZeRO >= 1 recovery from memory, the part that runs every step: besides its own
// optimizer shard (AdamW's moments of the parameters it owns), each data-parallel rank
// keeps a replica of its ring neighbour's, sent over the data plane after every
// completed step. Rank r of N holds rank (r + 1) % N's shard: a single lost node's
// shard then survives on the rank before it, and only the loss of two ring neighbours
// together (a node and the holder of its replica) leaves a shard nowhere, so the job
// falls back to the newest checkpoint (sharded_state_sync.hpp decides that). With G ranks
// a node (cluster.gpus_per_node), rank r holds rank (r + G) % N's: the same local rank of
// the next node, so that a node's loss does not take a shard and its replica together
// (while the world spans more than one node).
//
// What a node holds, in its train::TrainingState: the whole parameters (ZeRO gathers
// them after every step, so they are the same on every rank), its own shard's moments at
// steps_done and the neighbour's at replica_steps_done, at their offsets in whole-buffer
// arrays. Per step each rank sends 2 x 4 bytes per element of its shard (m and v) to
// rank r - 1 and receives as many from rank r + 1: 8 P / N bytes each way for P
// parameters. The exchange is point to point with the two neighbours and waited for
// before the next step starts (so the state a node holds is always of a completed step:
// the replica that arrives is committed only when whole), measured as exchange_ms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::dist {

// What one rank holds and moves for the replica (the peer_replica event).
struct PeerReplicaFootprint {
  int holds_rank = -1;          // whose shard this rank keeps (-1: a world of one)
  uint64_t replica_bytes = 0;   // the neighbour's shard (m and v): received per step
  uint64_t own_bytes = 0;       // this rank's shard (m and v): sent per step
  uint64_t state_bytes = 0;     // host memory of the kept state (params, m, v, staging)
};

class PeerShardReplica {
 public:
  // `comm`: the data-parallel group the trainer reduces over (its rank and size are the
  // ZeRO ranks); `bucket_bytes`: the reducer's (the shards are pieces of its buckets).
  // Both `comm` and `state` must outlive this object.
  // `ranks_per_node`: the world's ranks come in groups of that many a node (the
  // replica's holder is on the next node).
  PeerShardReplica(comm::Communicator& comm, train::TrainingState& state, size_t bucket_bytes,
                   int ranks_per_node = 1);

  // After step `steps_done` completed: keeps this rank's parameters and shard, then swaps
  // shards with the ring neighbours. Collective between neighbours (every rank calls it
  // at every step). Throws comm::CommError when the data plane fails; the state then
  // still holds this step's own shard and the previous replica, each marked with its step.
  void after_step(int64_t steps_done, train::Trainer& trainer);

  PeerReplicaFootprint footprint() const { return footprint_; }
  // Wall time of the last exchange (snapshot, pack, transfer, unpack), their mean, and
  // the steps kept so far by this object (this epoch).
  double last_exchange_ms() const { return last_exchange_ms_; }
  double mean_exchange_ms() const { return steps_kept_ > 0 ? total_exchange_ms_ / steps_kept_ : 0.0; }
  int64_t steps_kept() const { return steps_kept_; }

 private:
  void prepare(train::Trainer& trainer);

  comm::Communicator& comm_;
  train::TrainingState& state_;
  size_t bucket_bytes_;
  int ranks_per_node_;
  bool prepared_ = false;
  int successor_ = -1, predecessor_ = -1;
  std::vector<model::ParamRange> own_ranges_, replica_ranges_;
  std::vector<float> outgoing_, incoming_;  // packed m then v, reused every step
  PeerReplicaFootprint footprint_;
  double last_exchange_ms_ = 0.0;
  double total_exchange_ms_ = 0.0;
  int64_t steps_kept_ = 0;
};

// The ZeRO shard of `rank` of `world_size` (the reducer's rule: a piece of every gradient
// bucket of `bucket_bytes`), for a model whose backward finalises `backward_order`.
std::vector<model::ParamRange> zero_shard_of(const std::vector<model::ParamRange>& backward_order,
                                             size_t total, size_t bucket_bytes, int rank,
                                             int world_size);

// Sends `outgoing` to rank `to` and receives `incoming` (sized by the caller) from rank
// `from` of `comm`, both posted at once; a failure aborts `comm` before it rethrows, so
// neither buffer is in use when it returns. What a ring of neighbours swaps every step.
void exchange_with_neighbours(comm::Communicator& comm, const std::vector<float>& outgoing,
                              int to, std::vector<float>& incoming, int from);

// Copies the ranges of `from` one after the other to `packed` and back; each returns
// the end of what it packed or read.
float* pack_ranges(const std::vector<model::ParamRange>& ranges, const float* from, float* packed);
const float* unpack_ranges(const std::vector<model::ParamRange>& ranges, const float* packed,
                           float* to);

// Copies the ranges of `m` and `v` into `packed` (m's, then v's) and back.
void pack_moments(const std::vector<model::ParamRange>& ranges, const float* m, const float* v,
                  std::vector<float>& packed);
void unpack_moments(const std::vector<model::ParamRange>& ranges, const float* packed, float* m,
                    float* v);

}  // namespace dseek::dist
