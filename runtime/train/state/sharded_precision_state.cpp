// Implementation of sharded_precision_state.hpp.
#include "runtime/train/state/sharded_precision_state.hpp"

#include <algorithm>
#include <stdexcept>

namespace dseek::train {

Fp8StateAssembly::Fp8StateAssembly(int64_t copies, size_t operands, int64_t history_length)
    : copies_(copies), operands_(operands),
      history_length_(static_cast<size_t>(std::max<int64_t>(history_length, 0))),
      per_copy_(operands * (1 + history_length_)),
      buffer_(static_cast<size_t>(copies) * per_copy_, 0.0f) {}

void Fp8StateAssembly::put(const numerics::DelayedScalingState& mine, int64_t copy, size_t first,
                           size_t count) {
  if (mine.replicas != 1 || mine.scales.size() != operands_ ||
      mine.histories.size() != operands_ * history_length_ || copy < 0 || copy >= copies_ ||
      first + count > operands_)
    throw std::logic_error("fp8 checkpoint state: a rank's operands do not fit the assembly");
  std::copy_n(mine.scales.begin() + static_cast<std::ptrdiff_t>(first), count, scales_of(copy) + first);
  std::copy_n(mine.histories.begin() + static_cast<std::ptrdiff_t>(first * history_length_),
              count * history_length_, histories_of(copy) + first * history_length_);
}

numerics::DelayedScalingState Fp8StateAssembly::state() const {
  numerics::DelayedScalingState state;
  state.replicas = copies_;
  state.history_length = static_cast<int64_t>(history_length_);
  for (int64_t c = 0; c < copies_; ++c) {
    const auto from = buffer_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(c) * per_copy_);
    const auto histories = from + static_cast<std::ptrdiff_t>(operands_);
    state.scales.insert(state.scales.end(), from, histories);
    state.histories.insert(state.histories.end(), histories,
                           histories + static_cast<std::ptrdiff_t>(operands_ * history_length_));
  }
  return state;
}

Fp8Restore fp8_state_to_restore(const numerics::DelayedScalingState& written,
                                const LayoutSizes& written_by, const LayoutSizes& now,
                                int replica, int tensor_rank) {
  Fp8Restore restore;
  restore.own = written.replicas == static_cast<int64_t>(now.data) * now.tensor &&
                written_by.data == now.data && written_by.tensor == now.tensor;
  if (restore.own) {
    restore.state = numerics::replica_state(written, fp8_copy_of(replica, tensor_rank,
                                                                 static_cast<int>(now.tensor)));
    return restore;
  }
  // On another tensor size a rank's new shard of a weight or output gradient is made of
  // elements of the old shards, so its amax is at most the largest of theirs: the merge
  // (per operand the largest amax of every copy and the smallest scale) can under-use
  // the fp8 range for at most a history's worth of steps, until the rank's own amaxes
  // replace the merged ones, but it never gives a scale that overflows. The same holds
  // for other replica counts: a new replica's slice of the global batch is made of parts
  // of the old replicas' slices.
  restore.state = numerics::merged_state(written);
  return restore;
}

std::string fp8_merge_note(const LayoutSizes& written_by, const LayoutSizes& now, int64_t copies) {
  std::string note = "checkpoint: the fp8 amax histories of " + std::to_string(copies) +
                     " copies (data " + std::to_string(written_by.data);
  note += " x tensor " + std::to_string(written_by.tensor);
  note += ") merged for this layout (data " + std::to_string(now.data);
  note += " x tensor " + std::to_string(now.tensor);
  note += "): the most cautious scales";
  return note;
}

}  // namespace dseek::train
