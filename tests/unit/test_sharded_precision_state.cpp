// The fp8 state of a model held in pieces (runtime/train/state/sharded_precision_state.hpp):
// the copies assembled from ranks that each hold some layers come out as the
// whole-model state of each copy, bit for bit, whatever the split; a rank of the same
// data and tensor sizes takes its own copy back (any pipeline split), and any other
// layout the cautious merge (largest amax, smallest scale of every copy).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/numerics/delayed_scaling.hpp"
#include "runtime/train/state/sharded_precision_state.hpp"

using namespace dseek;
using train::Fp8StateAssembly;
using train::LayoutSizes;

namespace {
constexpr size_t kOperands = 24;  // 2 layers x 12 operands
constexpr int64_t kHistory = 3;

// A distinct whole-model state for copy `copy` (each value names copy, operand, slot).
numerics::DelayedScalingState state_of(int64_t copy) {
  numerics::DelayedScalingState state;
  state.history_length = kHistory;
  for (size_t i = 0; i < kOperands; ++i) {
    state.scales.push_back(1.0f + static_cast<float>(copy) * 100.0f + static_cast<float>(i));
    for (int64_t h = 0; h < kHistory; ++h)
      state.histories.push_back(0.5f * static_cast<float>(copy + 1) + static_cast<float>(i * 10 + h));
  }
  return state;
}

LayoutSizes sizes(uint32_t data, uint32_t pipeline, uint32_t tensor) {
  LayoutSizes s;
  s.data = data;
  s.pipeline = pipeline;
  s.tensor = tensor;
  return s;
}
}  // namespace

TEST_CASE("sharded fp8 state: two stages x two tensor ranks assemble each rank's copy by "
          "layer, bit for bit", "[unit][precision][checkpoint]") {
  // Ranks (stage, tensor rank): stage 0 holds layer 0 (operands 0..11), stage 1 layer 1.
  const int tensor_ranks = 2;
  std::vector<float> summed;
  for (int stage = 0; stage < 2; ++stage)
    for (int rank = 0; rank < tensor_ranks; ++rank) {
      Fp8StateAssembly assembly(tensor_ranks, kOperands, kHistory);
      // What a stage's chunk reports covers the whole model; only its layer is its own.
      numerics::DelayedScalingState mine = state_of(rank);
      for (size_t i = 0; i < kOperands; ++i)
        if (i / 12 != static_cast<size_t>(stage)) mine.scales[i] = 1.0f;  // untouched layers
      assembly.put(mine, train::fp8_copy_of(0, rank, tensor_ranks), static_cast<size_t>(stage) * 12, 12);
      const auto buffer = assembly.buffer();
      if (summed.empty()) summed.assign(buffer.size(), 0.0f);
      for (size_t i = 0; i < buffer.size(); ++i) summed[i] += buffer[i];
    }
  Fp8StateAssembly result(tensor_ranks, kOperands, kHistory);
  std::copy(summed.begin(), summed.end(), result.buffer().begin());
  const numerics::DelayedScalingState whole = result.state();
  CHECK(whole.replicas == tensor_ranks);
  CHECK(whole.history_length == kHistory);
  for (int rank = 0; rank < tensor_ranks; ++rank) {
    const numerics::DelayedScalingState copy = numerics::replica_state(whole, rank);
    CHECK(copy.scales == state_of(rank).scales);
    CHECK(copy.histories == state_of(rank).histories);
  }
}

TEST_CASE("sharded fp8 state: a resume takes its own copy on the same data and tensor sizes, "
          "else the cautious merge", "[unit][precision][checkpoint]") {
  // Written by data 2 x pipeline 2 x tensor 2: copies replica-major.
  Fp8StateAssembly assembly(4, kOperands, kHistory);
  for (int64_t copy = 0; copy < 4; ++copy) assembly.put(state_of(copy), copy, 0, kOperands);
  const numerics::DelayedScalingState written = assembly.state();
  const LayoutSizes by = sizes(2, 2, 2);

  // Another pipeline size: replica 1's tensor rank 0 is copy 2.
  const train::Fp8Restore own = train::fp8_state_to_restore(written, by, sizes(2, 4, 2), 1, 0);
  CHECK(own.own);
  CHECK(own.state.scales == state_of(2).scales);
  CHECK(own.state.histories == state_of(2).histories);

  // Another tensor size (and another data size): the merge, for every rank alike.
  for (const LayoutSizes& now : {sizes(2, 2, 1), sizes(1, 2, 2), sizes(4, 1, 1)}) {
    const train::Fp8Restore merged = train::fp8_state_to_restore(written, by, now, 0, 0);
    CHECK_FALSE(merged.own);
    CHECK(merged.state.replicas == 1);
    CHECK(merged.state.scales == state_of(0).scales);          // the smallest scales
    CHECK(merged.state.histories == state_of(3).histories);    // the largest amaxes
  }
}
