// The event router of a node: the one fixed address that the cluster agent, the
// coordinator and the supervisors report to (their listener). It turns each event into a
// line of the node's events.jsonl (through the metrics exporter), passes the epochs to
// the workers (one per local rank, cluster.gpus_per_node), and the events that end the node (join refused, cannot join) to the node's
// main loop. It is plumbing, not supervised, and holds no state but the last epoch, which
// a (re)started worker asks for:
//
//   (get_atom) -> epoch_started   the latest epoch (epoch 0: none yet)
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

namespace dseek::actors {

// `node_main` gets join_refused and agent_event{"join_failed"}; the membership events go
// to the workers of the node's `local_ranks` worker groups.
caf::actor spawn_event_router(caf::actor_system& sys, caf::actor node_main, int local_ranks = 1);

// The coordinator's listener on the coordinator node: it logs only the refused joins
// (the node's own agent reports the joins, losses and epochs, once).
caf::actor spawn_refusal_logger(caf::actor_system& sys);

}  // namespace dseek::actors
