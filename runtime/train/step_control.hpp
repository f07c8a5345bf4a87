// What the node asks of its running training between two steps, besides stopping: hold
// the job at a step boundary (pause, until resumed) and write a checkpoint there
// (checkpoint now). The embedding interface sets it (actors/node/embedded_node.hpp);
// run_steps reads it at every step boundary, where the ranks vote on it together with
// the stop request, so that every rank pauses and checkpoints at the same step. Owned by
// the node, shared by its worker groups; thread-safe.
#pragma once

#include <atomic>

namespace dseek::train {

struct StepControl {
  // Set: the job pauses at the next step boundary and stays paused while any node of it
  // holds its flag set.
  std::atomic<bool> pause{false};
  // Set: a checkpoint at the next step boundary after the first step (taken by the rank
  // that votes it: set it again for another).
  std::atomic<bool> checkpoint{false};
};

}  // namespace dseek::train
