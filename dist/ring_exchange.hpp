// What the ring of a data group swaps after every step under ZeRO (dist/stage_memory_sync.hpp):
// each replica sends its pieces of the optimizer state to the replica before it and
// receives the one after it's, point to point with its two neighbours, and packs the
// pieces of a flat buffer for that (and for a recovery's broadcasts).
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::dist {

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

}  // namespace dseek::dist
