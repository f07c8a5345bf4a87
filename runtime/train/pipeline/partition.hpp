// Which layers each pipeline stage runs: the model's blocks cut into contiguous ranges,
// one per virtual stage (virtual stage g = chunk * P + stage, pipeline/schedule.hpp).
// The first range also runs the embedding and the last the final LayerNorm, the tied
// head and the loss, so with equal block counts the end stages are the slowest:
// "balanced" takes measured costs (profile_layer_costs) and minimizes the slowest
// stage; "uniform" splits the block count evenly (parallel.partition).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/recompute_policy.hpp"

namespace dseek::train {

// Forward + backward time of each part of the model on one micro-batch (any unit).
struct LayerCosts {
  double embedding = 0.0;
  std::vector<double> blocks;
  double head = 0.0;  // final LayerNorm, tied output projection, loss
  // Under model.recompute: which blocks of a range are recomputed (counted from the
  // range's first block, so the cost of a block depends on where the split puts it) and
  // what recomputing each block adds (its forward run again in backward); empty: none.
  model::RecomputePolicy recompute_policy;
  std::vector<double> recompute;
};

// The cost of running blocks [range) with the embedding if it is the first range and
// the head if it is the last, plus the recompute of the blocks the policy recomputes in
// that range.
double range_cost(const LayerCosts& costs, const model::LayerRange& range);

// `parts` contiguous ranges covering every block, each at least one block; the block
// count as even as possible (the earlier ranges one block longer when it does not
// divide). Throws std::invalid_argument when there are fewer blocks than parts.
std::vector<model::LayerRange> uniform_partition(int64_t layers, int64_t parts);

// `parts` contiguous ranges of at least one block each minimizing the largest
// range_cost (exact, by dynamic programming; ties go to the earliest cut).
std::vector<model::LayerRange> balanced_partition(const LayerCosts& costs, int64_t parts);

// Measures LayerCosts on `backend`: forward + backward of the embedding, each block and
// the head alone on a micro-batch of `micro_batch` x context; `repetitions` rounds over
// all the parts, each part's fastest round kept. With a recompute policy, each block
// is also timed recomputed, and what that adds (never below 0) is LayerCosts::recompute.
LayerCosts profile_layer_costs(const model::GptShape& shape, backend::Backend& backend,
                               int64_t micro_batch, int repetitions = 3,
                               model::RecomputePolicy recompute = {});

// "[0,3) [3,6)"-style text of a partition, for logs and events.
std::string describe_partition(const std::vector<model::LayerRange>& ranges);

}  // namespace dseek::train
