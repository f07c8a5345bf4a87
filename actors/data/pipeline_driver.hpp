// The driver of `dseek data prepare`: it starts the supervision tree of the stages
//   prepare (one_for_one)
//    |- decode   (one_for_one)  decode-0 .. decode-{W-1}
//    |- clean    (one_for_one)  clean-0 ..
//    |- dedup    (one_for_one)  dedup-0
//    |- tokenize (one_for_one)  tokenize-0 ..
//    |- augment  (one_for_one)  augment-0 ..      (when FIM is on)
//    `- write    (one_for_one)  write-0
// and moves the pieces between them. Flow control is by credits: at most `window`
// pieces are between reading and writing; a piece is read only when a credit is free,
// and the credit comes back when the writer has written it, so a slow stage slows every
// stage before it and memory stays under window x (the largest piece). One credit is
// kept for the lowest file not fully read: the in-order stages wait for it, so it must
// always be able to move (no deadlock however the other files fill the window).
// Each worker holds one piece at a time; the driver keeps the piece until the next
// stage's result is back. A worker that dies (a crash) is restarted by its supervisor;
// the driver gives its piece again (to the restarted actor or another), so nothing is
// lost, and the in-order stages take every piece once, in (file, number) order.
// When everything is written, or on the first fatal error, it stops the tree and sends
// (prep_done_atom, std::string error) to `reply_to` ("" on success).
#pragma once

#include <ostream>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/data/prepare_context.hpp"

namespace dseek::actors {

caf::actor spawn_prepare_driver(caf::actor_system& sys, context_ptr context, std::ostream& log,
                                caf::actor reply_to);

}  // namespace dseek::actors
