// The rank layout of a pipeline or tensor-parallel job (layout/parallel_groups.hpp) as every
// rank prints and logs it at start: one progress line per rank of the world, and a
// parallel_layout event with this rank's coordinates and the whole layout.
#pragma once

#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/layout/parallel_groups.hpp"

namespace dseek::train {

void report_parallel_layout(const ParallelGroups& groups, int world_rank,
                            metrics::EventLog& events, metrics::Progress& progress);

}  // namespace dseek::train
