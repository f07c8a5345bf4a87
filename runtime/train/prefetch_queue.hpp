// The prefetch queue's depth as the trainer on this thread last saw it: a prefetching
// BatchSource (PrefetchingBatches, the node's data_prefetcher actor) notes, when the
// trainer asks for the first batch of a step, for how many steps from that one on it has
// batches ready (0 .. data.prefetch; 0: the trainer waits for this step's batch). The
// step event reports it as prefetch_queue_depth (run_events.cpp), and /metrics as
// dseek_data_prefetch_queue_depth. Per thread, since a batch source is filled on the
// thread that trains the step and emits its event. -1: no prefetching source filled a
// batch on this thread.
#pragma once

#include <cstdint>

namespace dseek::train {

void note_prefetch_queue_depth(int64_t steps_ready);
int64_t prefetch_queue_depth();

}  // namespace dseek::train
