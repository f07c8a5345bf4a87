// The data_prefetcher actor of a node (DESIGN.md: node_supervisor's data_prefetcher*):
// it keeps this node's slices of the next data.prefetch steps' batches ready ahead of
// the worker, so that reading the data stalls a step only when it falls behind; the
// step events' data_wait_ms shows when it does.
//
// The training thread does not talk CAF: its run gets a train::BatchSource from
// prefetcher_for() through RunOptions::batch_prefetcher. That source asks the actor for
// every slice the trainer wants (a request with a bounded wait), sending along the run's
// own data set (a shared, thread-safe BatchSource). The actor learns what to build from
// the requests, as PrefetchingBatches does: the slices asked for in step s are built for
// steps s+1 .. s+depth. A slice it has ready is a hit; any other it builds on the spot
// (a miss). The batch comes back as a pointer to an immutable buffer, which never leaves
// the process; the answer to a step's first request also says how many steps the actor
// had slices ready for (the step event's prefetch_queue_depth: prefetch_queue.hpp). A
// batch is a pure function of (step, slice), so results do not change.
//
// When the actor is not there (crashed and being restarted) or does not answer in time,
// the source fills the slice itself from the data set: never a wrong batch, at worst a
// slower one. A restarted actor starts empty and learns again from the next requests.
//
// Building one slice is a copy of a few thousand tokens out of mapped shards: the actor
// runs on CAF's scheduler and builds one slice per message, so requests and other actors
// are never held up for long.
//
// Its interface is data_prefetcher_actor below; the batch requests themselves are
// private to prefetcher_for()'s source (they carry process-local pointers).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/faults/crash_request.hpp"

#include "runtime/train/batch_source.hpp"

namespace dseek::actors {

// What the actor has done since it started (tests, tools).
struct prefetch_stats {
  std::uint64_t hits = 0;       // requests served from a slice built ahead
  std::uint64_t misses = 0;     // requests built on the spot
  std::uint64_t built_ahead = 0;
  std::int64_t ready_through = -1;  // the furthest step with a slice ready (-1: none)
};

}  // namespace dseek::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::prefetch_stats)

namespace dseek::actors {

// What the data prefetcher accepts and answers, besides the batch requests of
// prefetcher_for()'s source (all local).
using data_prefetcher_actor = caf::typed_actor<
    // What it did since it started: hits, misses, slices built ahead, the furthest
    // step ready.
    caf::replies_to<caf::get_atom>::with<prefetch_stats>,
    // The crash_actor fault: it throws (its supervisor restarts it).
    caf::reacts_to<crash_atom>>;

// The data prefetcher of worker group `local_rank` of `sys` now (null while none runs).
data_prefetcher_actor data_prefetcher_of(caf::actor_system& sys, int local_rank = 0);

// Spawns the actor keeping `depth` steps ahead (data.prefetch) for the worker of group
// `local_rank` (a node runs one per worker group, cluster.gpus_per_node); it registers
// itself under names::data_prefetcher_of(local_rank) (a restarted one replaces its
// predecessor).
// `crash`: whether it obeys crash requests (the node's: crash_requests_of its job).
caf::actor spawn_data_prefetcher(caf::actor_system& sys, std::int64_t depth,
                                 int local_rank = 0,
                                 crash_requests crash = crash_requests::obeyed);

// For RunOptions::batch_prefetcher: a BatchSource served by the node's data_prefetcher,
// filling from `source` itself when the actor cannot answer within `wait`. Null when no
// data_prefetcher runs in `sys` (a training outside the node's tree): the run then
// prefetches on a thread of its own.
// `local_rank`: whose data_prefetcher (the worker group's).
std::function<std::unique_ptr<train::BatchSource>(std::shared_ptr<train::BatchSource> source)>
prefetcher_for(caf::actor_system& sys, std::chrono::milliseconds wait = std::chrono::seconds(2),
               int local_rank = 0);

}  // namespace dseek::actors
