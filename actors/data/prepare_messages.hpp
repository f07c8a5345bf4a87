// Messages of `dseek data prepare`'s pipeline (local only: pieces never leave the
// process). The driver hands a worker one piece at a time; the worker answers with the
// piece it made:
//   worker -> driver  (ready_atom, uint8_t stage)             on every (re)start
//   driver -> decode  (decode_atom, uint32_t file, uint32_t number)
//   driver -> others  (work_atom, piece_ptr)
//   worker -> driver  (done_atom, piece_ptr)
#pragma once

#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "runtime/data/piece.hpp"

namespace dseek::actors {

using prep_ready_atom = caf::atom_constant<caf::atom("dpready")>;
using prep_decode_atom = caf::atom_constant<caf::atom("dpdecode")>;
using prep_work_atom = caf::atom_constant<caf::atom("dpwork")>;
using prep_done_atom = caf::atom_constant<caf::atom("dpdone")>;
using prep_tick_atom = caf::atom_constant<caf::atom("dptick")>;

// Immutable once sent: a worker copies what it changes, so a crashed worker's piece is
// still whole in the driver, to be given again.
using piece_ptr = std::shared_ptr<const data::Piece>;

}  // namespace dseek::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::piece_ptr)
