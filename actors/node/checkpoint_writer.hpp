// The checkpoint_writer actor of a node (DESIGN.md, node supervisor tree): it persists
// the checkpoint snapshots the node's training hands it, while training goes on.
//
// The training thread does not talk CAF: it gets a checkpoint::CheckpointSink from
// checkpoint_sink_for() through RunOptions::checkpoint_sink. The sink owns the host
// snapshot buffer (shared with the request, so it outlives a restarted worker); submit()
// sends the actor one persist request holding it and returns. The actor writes
// (checkpoint/write.hpp) and completes the request. Tensors never travel in the message:
// only a pointer to the buffer, which never leaves the process.
//
// The actor is detached (a thread of its own): a write blocks for as long as the disk
// takes, which must never hold up CAF's scheduler. One request at a time; the sink sends
// the next only after the last completed.
//
// A request the actor never runs (it crashed or stopped first, or none is running)
// completes as a failed write when the request is destroyed, so the training never
// waits for a write that will not come. The node supervisor stops its children in
// reverse start order, so the worker (started later) writes its final checkpoint before
// this actor is asked to stop.
//
// Its interface is checkpoint_writer_actor below; the persist requests themselves are
// private to the sinks of checkpoint_sink_for() (they carry process-local pointers).
#pragma once

#include <cstdint>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/faults/crash_request.hpp"

#include "runtime/checkpoint/sink.hpp"

namespace dseek::actors {

// Spawns the actor; it makes itself the checkpoint_writer of `sys` (a restarted one
// replaces its predecessor). Not in CAF's registry, whose strong reference would keep a
// detached actor's thread waiting at shutdown: see checkpoint_writer.cpp.
// `crash`: whether it obeys crash requests (the node's: crash_requests_of its job).
caf::actor spawn_checkpoint_writer(caf::actor_system& sys,
                                   crash_requests crash = crash_requests::obeyed);

// What the checkpoint writer accepts and answers, besides the sinks' persist requests
// (all local).
using checkpoint_writer_actor = caf::typed_actor<
    // The snapshots it has run since it started (written or failed: the sink that
    // submitted one reads its outcome).
    caf::replies_to<caf::get_atom>::with<std::uint64_t>,
    // The crash_actor fault: it throws (its supervisor restarts it).
    caf::reacts_to<crash_atom>>;

// The checkpoint writer of `sys` now (null while none runs).
checkpoint_writer_actor checkpoint_writer_of(caf::actor_system& sys);

// Sinks that hand their snapshots to the checkpoint_writer of `sys`, looked up at submit
// time. When `sys` has none (a worker outside the node's tree), the factory makes no
// sink, and the run writes on a thread of its own.
checkpoint::CheckpointSinkFactory checkpoint_sink_for(caf::actor_system& sys);

}  // namespace dseek::actors
