// What a rank resumed from when its world's ranks agreed on a state held in memory, in
// every layout (state/stage_memory.hpp). The node's control loop reports it in the
// recovered event.
#pragma once

#include <cstdint>
#include <string>

namespace dseek::train {

struct MemoryRecovery {
  int64_t steps_done = -1;  // the step resumed from memory; -1: not from memory
  bool from_peer = false;   // this rank's state came from another rank's memory
  std::string why_not;      // when steps_done is -1: why no step could be taken from memory
};

}  // namespace dseek::train
