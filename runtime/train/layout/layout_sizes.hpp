// The sizes of a job's parallel layout, as a checkpoint's manifest records them (the
// resume compares the layout that wrote a checkpoint with the one reading it).
#pragma once

#include <cstdint>

namespace dseek::train {

struct LayoutSizes {
  uint32_t data = 1, pipeline = 1, tensor = 1;
  uint32_t zero = 0;  // the ZeRO stage whose sharded moments a snapshot gathers
  uint32_t world() const { return data * pipeline * tensor; }
};

}  // namespace dseek::train
