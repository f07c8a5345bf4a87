// How many bytes of activation buffers a model (GptModel, whole or a tensor rank) allocated,
// by what they are for. All of them are allocated at construction, so this is also what
// a training step uses beyond parameters, gradients and optimizer state; the runs log
// it at start (model_memory event) to show what model.recompute saves.
#pragma once

#include <cstddef>

namespace dseek::model {

struct ActivationMemory {
  size_t kept = 0;       // held from forward to backward (every activation slot)
  size_t recompute = 0;  // the scratch set recomputed blocks run in (0 without recompute)
  size_t backward = 0;   // backward's scratch (gradients of the activations)
  size_t total() const { return kept + recompute + backward; }
};

}  // namespace dseek::model
