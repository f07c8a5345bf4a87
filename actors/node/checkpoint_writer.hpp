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
//   persist request (local only, see checkpoint_writer.cpp); crash_atom (crash_actor).
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "runtime/checkpoint/sink.hpp"

namespace dseek::actors {

// Spawns the actor; it makes itself the checkpoint_writer of `sys` (a restarted one
// replaces its predecessor). Not in CAF's registry, whose strong reference would keep a
// detached actor's thread waiting at shutdown: see checkpoint_writer.cpp.
caf::actor spawn_checkpoint_writer(caf::actor_system& sys);

// Sinks that hand their snapshots to the checkpoint_writer of `sys`, looked up at submit
// time. When `sys` has none (a worker outside the node's tree), the factory makes no
// sink, and the run writes on a thread of its own.
checkpoint::CheckpointSinkFactory checkpoint_sink_for(caf::actor_system& sys);

}  // namespace dseek::actors
