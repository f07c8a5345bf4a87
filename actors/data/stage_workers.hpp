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
// Their interfaces are decode_worker_actor and piece_worker_actor below.
#pragma once

#include <cstdint>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/data/prepare_context.hpp"
#include "actors/data/prepare_messages.hpp"

namespace dseek::actors {

// A decode worker: piece `number` (from 0) of input file `file` (an index into the
// context's listing), read from the file or its cache entry. It answers the driver with
// (prep_done_atom, piece_ptr), the piece's `last` set on the file's last piece, or
// `fatal` set when a cache entry is damaged.
using decode_worker_actor =
    caf::typed_actor<caf::reacts_to<prep_decode_atom, std::uint32_t, std::uint32_t>>;

// A clean, dedup, tokenize, augment or write worker: one piece in, (prep_done_atom,
// piece_ptr) to the driver with the piece it made (`fatal` set when the stage's work
// failed for good, e.g. a disk full); the writer answers the piece without its
// documents.
using piece_worker_actor = caf::typed_actor<caf::reacts_to<prep_work_atom, piece_ptr>>;

// Every worker first sends the driver (prep_ready_atom, uint8_t stage), on its start and
// on every restart. Untyped for the driver's supervision: a decode_worker_actor for
// the decode stage, a piece_worker_actor for the others.

caf::actor spawn_stage_worker(caf::actor_system& sys, data::PrepareStage stage,
                              const context_ptr& context, const caf::actor& driver);

}  // namespace dseek::actors
