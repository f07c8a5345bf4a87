// Element-wise sums of a few doubles (losses, counts, votes, the squared norm) over the
// ranks of a communicator, added in rank order on every rank, so every rank gets the
// same bits (the data plane reduces f32 only). Used by CommPipelineLinks (over the
// stages) and CommReplicaGroup (over the replicas).
#pragma once

#include <span>
#include <vector>

#include "comm/communicator.hpp"

namespace dseek::dist {

// Collective over `comm`; `scratch` is reused between calls (size x values' bytes).
void sum_doubles_in_rank_order(comm::Communicator& comm, std::span<double> values,
                               std::vector<unsigned char>& scratch);

}  // namespace dseek::dist
