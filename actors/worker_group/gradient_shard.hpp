// The gradient_shard actors of a node's worker group (DESIGN.md: worker_group
// (one_for_all) with the worker and gradient_shard*): they hold the optimizer state
// (AdamW moments) of this replica's parameters, the whole buffer under parallel.zero = 0
// or the replica's ZeRO shard under 1 and 2, cut into contiguous pieces, one per actor,
// and run the update of their piece when the training thread asks. The pieces update in
// parallel on CAF's scheduler threads, each actor with a single-threaded CPU backend of
// its own (host memory: the place the CPU offload of a GPU stage keeps them too). That
// backend allocates from the trainer backend's host memory (OptimizerSpec::host_memory):
// pinned when the trainer runs on a CUDA device.
//
// The overlapped offload (train.offload_overlap, runtime/train/host_update.hpp): the client
// can also start an update and return (OptimizerShards::start_update). Each actor then
// goes through its piece in layout order and reports every chunk (embeddings, block i,
// final LayerNorm) to a shared train::UpdateProgress as soon as its part of the chunk
// is done; the training thread sends the chunk to the device and its next forward
// waits for exactly the chunks it reads. A shard that goes down fails that progress at
// once (a functor attached to the actor), so a waiting forward throws
// gradient_shard_lost without waiting for a timeout.
//
// The training thread does not talk CAF: its trainer gets a train::OptimizerShards from
// gradient_shards_for() through RunOptions::optimizer_shards. That client assigns each
// actor its piece when the trainer is built (a fresh AdamW: moments then come from a
// checkpoint or a peer through moments_from_host), and for each step sends every actor
// one update request (pointers to the trainer's parameter and gradient buffers, which
// never leave the process) and waits for all, bounded. The order of the step stays the
// trainer's: finish the reduction, norm, update (here), gather.
//
// The pipeline and tensor-parallel trainers (3D jobs) get their optimizers the same way:
// a pipeline stage has one per chunk (an interleaved schedule gives it several, each
// over its own flat buffer), so an actor holds one piece per client, keyed by the
// client, and a client frees its pieces when it goes away. A tensor-parallel shard's
// buffer is not a ParamLayout: its client passes each range's decay setting
// (OptimizerSpec::decay_ranges), and each actor gets its piece's.
//
// A gradient_shard that crashes takes the worker group down with it (one_for_all): the
// worker watches its shards and fails at once (its training aborts its collectives, as
// on a worker crash), the supervisor restarts the whole group, and the node recovers as
// after a worker crash (control/epoch_loop.hpp). A request that finds its actor gone
// throws gradient_shard_lost on the training thread.
//
// Messages (local to the process, not announced): the assignment and its release, the
// update, moments to / from host, the given second moment (compressed gradients); crash_atom (crash_actor fault, which names shard 0).
#pragma once

#include <stdexcept>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/faults/crash_request.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/optimizer_shards.hpp"

namespace dseek::actors {

// A gradient_shard the trainer relies on is gone (crashed, or restarted with the group).
struct gradient_shard_lost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How many gradient_shard actors a node's worker group has: one per compute thread
// (train.threads), so the update runs as wide as the trainer's own did; none when AdamW
// runs on the device (config::optimizer_offloaded false).
int gradient_shard_count(const config::JobConfig& config);

// Spawns gradient_shard number `index` of worker group `local_rank` (a node runs one
// group per local rank, cluster.gpus_per_node); it registers itself under
// names::gradient_shard(index, local_rank).
// `crash`: whether it obeys crash requests (the node's: crash_requests_of its job).
caf::actor spawn_gradient_shard(caf::actor_system& sys, int index, int local_rank = 0,
                                crash_requests crash = crash_requests::obeyed);

// The gradient_shard actors of group `local_rank` now registered (0 .. count-1); empty
// unless all are.
std::vector<caf::actor> running_gradient_shards(caf::actor_system& sys, int count,
                                                int local_rank = 0);

// Optimizers kept by the `count` gradient_shard actors of group `local_rank`. When they
// are not all running (a training outside the node's tree), the factory returns null:
// the trainer then keeps its own LocalOptimizer.
train::OptimizerShardsFactory gradient_shards_for(caf::actor_system& sys, int count,
                                                  int local_rank = 0);

}  // namespace dseek::actors
