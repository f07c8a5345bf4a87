// The fp8 training state of a model held in pieces (pipeline stages, tensor-parallel
// shards), for gathered checkpoints (state/checkpointing.hpp): how the ranks'
// delayed-scaling states (model/precision_policy.hpp: one scale and amax history per
// fp8 matmul operand, indexed by layer) become the one state a checkpoint's manifest
// keeps (checkpoint/precision_state.hpp), and which part of it a rank takes back.
//
// Copies. The data-parallel checkpoints keep one copy of the whole model's state per
// replica (each replica quantizes its own slice of the batch). Here a copy is kept per
// (data replica, tensor rank), replica-major: a tensor rank quantizes its own shard (its
// weights' amaxes are its slices', its output gradients' those of its columns), so the
// tensor ranks' amaxes differ as the replicas' do. Without tensor parallelism that is the
// data-parallel format itself (copies = replicas), so either kind resumes the other.
//
// Layers. Every rank's PrecisionPolicy covers the whole model's layers, but a pipeline
// stage only runs (and only updates the amaxes of) the layers of its chunks' ranges. A
// copy is assembled by layer index from the stages that hold each layer, so a resume on
// another pipeline split or size finds each layer's state wherever it was written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/numerics/delayed_scaling.hpp"
#include "runtime/train/layout/layout_sizes.hpp"

namespace dseek::train {

// Collects the copies: every rank puts its own operands into its slot of a zeroed
// buffer, and the caller sums the buffer over every rank that holds a piece (each float
// has one non-zero contributor, and x + 0 is exact: the sum is a gather, bit for bit;
// amaxes and scales are never -0.0).
class Fp8StateAssembly {
 public:
  // `copies` copies of `operands` operands with `history_length` amaxes each.
  Fp8StateAssembly(int64_t copies, size_t operands, int64_t history_length);

  // Operands [first, first + count) of `mine` (one copy, the whole model's operands)
  // into slot `copy`.
  void put(const numerics::DelayedScalingState& mine, int64_t copy, size_t first, size_t count);
  // The buffer to sum over the ranks.
  std::span<float> buffer() { return buffer_; }
  // The summed buffer as a checkpoint keeps it (replicas = copies).
  numerics::DelayedScalingState state() const;

 private:
  float* scales_of(int64_t copy) { return buffer_.data() + static_cast<size_t>(copy) * per_copy_; }
  float* histories_of(int64_t copy) { return scales_of(copy) + operands_; }

  int64_t copies_;
  size_t operands_;
  size_t history_length_;
  size_t per_copy_;  // operands scales, then operands x history_length amaxes
  std::vector<float> buffer_;
};

// The copy a rank keeps: replica-major, tensor rank minor.
inline int64_t fp8_copy_of(int replica, int tensor_rank, int tensor_ranks) {
  return static_cast<int64_t>(replica) * tensor_ranks + tensor_rank;
}

// What a rank of layout `now` (as replica `replica`, tensor rank `tensor_rank`) restores
// from the state `written` by layout `written_by`: its own copy when the data and tensor
// sizes are those that wrote it (the pipeline split does not matter: a layer's amaxes
// are those of the replica's batch and the rank's shard, whichever stage runs it), else
// the cautious merge of every copy (numerics::merged_state).
struct Fp8Restore {
  numerics::DelayedScalingState state;
  bool own = false;  // false: merged
};
Fp8Restore fp8_state_to_restore(const numerics::DelayedScalingState& written,
                                const LayoutSizes& written_by, const LayoutSizes& now,
                                int replica, int tensor_rank);

// The resumed note of a merge: what was merged, for which layout.
std::string fp8_merge_note(const LayoutSizes& written_by, const LayoutSizes& now, int64_t copies);

}  // namespace dseek::train
