// Activation recompute (model.recompute): which blocks of a model range drop their
// activations after forward and compute them again in backward.
//
// "none" keeps every block's activations. "every:N" recomputes blocks 0, N, 2N, ... of
// a range (counted from the range's first block, so each pipeline stage applies the
// setting to its own blocks); "every:1" recomputes them all. A recomputed block keeps
// only its input, which the model keeps anyway (the residual stream between blocks),
// and its output (the next block's input). "every:1" is Megatron-LM's full recompute
// (--recompute-granularity full --recompute-method uniform --recompute-num-layers 1):
// each transformer layer is a checkpoint whose input is stored and whose inside is
// redone in backward. "every:N" trades memory for time in between, as Megatron's
// "block" method does with its number of layers, but spreads the recomputed blocks
// evenly over the range (1 in N) instead of taking the first ones. All recomputed
// blocks share one scratch set, so memory shrinks once a range recomputes two or more.
// The config parses its value here so that validate() and the models agree on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dseek::model {

struct RecomputePolicy {
  int64_t every = 0;  // 0 = none; N >= 1 = blocks 0, N, 2N, ... of a range

  bool any() const { return every > 0; }
  // Whether the block at `index_in_range` (0 = the range's first block) is recomputed.
  bool recomputes(int64_t index_in_range) const {
    return every > 0 && index_in_range % every == 0;
  }
  // The setting as written in the config: "none" or "every:N".
  std::string text() const;
};

// "none" or "every:N" with N a decimal integer >= 1 (no sign, no spaces); nothing for
// any other text.
std::optional<RecomputePolicy> parse_recompute_policy(std::string_view text);

}  // namespace dseek::model
