// The worker actors of `dseek data prepare`'s stages (prepare_messages.hpp for their
// protocol). Each tells the driver it is ready when it starts (and again when its
// supervisor restarted it), then works one piece per message:
//   decode    keeps its file open between the pieces of one file; asked for another
//             piece (after a crash), it reopens the file and skips to it
//   clean     quality filters, hashes, MinHash signatures
//   dedup     the corpus-order duplicate removal (one actor; state in the context)
//   tokenize  the tokenizer (shared, const)
//   augment   fill-in-the-middle
//   write     the data set builder (one actor, detached: its file I/O holds no
//             scheduler thread; state in the context)
// A worker of the stage named by options.faults throws on its crash_at-th piece, once.
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/data/prepare_context.hpp"

namespace dseek::actors {

caf::actor spawn_stage_worker(caf::actor_system& sys, data::PrepareStage stage,
                              const context_ptr& context, const caf::actor& driver);

}  // namespace dseek::actors
