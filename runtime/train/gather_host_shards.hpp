// GradientReducer::gather_shards() of a host buffer, for every trainer's checkpoint
// snapshots of ZeRO's moment pieces: a reducer of host memory gathers in place; one of
// backend memory (the NCCL data plane) gathers a copy in the backend's memory and
// brings the result back (snapshots only: the steps gather in place).
#pragma once

#include <cstddef>

#include "runtime/backend/backend.hpp"
#include "runtime/train/gradient_reducer.hpp"

namespace dseek::train {

// `host`: `count` floats, this rank's pieces filled in; on return every rank's.
void gather_host_shards(GradientReducer& reducer, backend::Backend& backend, float* host,
                        size_t count);

}  // namespace dseek::train
