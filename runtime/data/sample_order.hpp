// The order in which training samples are visited: a pure function of
// (seed, step, index within the global batch), independent of the number of workers,
// so that every layout of the job (1 node, N nodes, after a failure) sees the same data.
//
// A sample is a window of context+1 tokens starting at sample_id * context. Position
// p = step * batch_size + i walks through epochs of num_samples positions; each epoch
// visits every sample once in a pseudo-random permutation (a keyed bijection on
// [0, num_samples), computed in O(1) without materialising it).
#pragma once

#include <cstdint>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

class SampleOrder {
 public:
  SampleOrder(uint64_t seed, uint64_t num_samples);
  uint64_t num_samples() const { return num_samples_; }
  // The sample id at global position `position` (any value: epochs wrap around).
  uint64_t sample_at(uint64_t position) const;

 private:
  uint64_t seed_;
  uint64_t num_samples_;
  unsigned half_bits_;  // the permutation runs on 2 x half_bits_ bits
};

// Number of samples of `context` tokens (plus one target) in a split of `num_tokens`.
uint64_t samples_in(uint64_t num_tokens, int64_t context);

// Fills sequences [first, first + count) of the global batch of `step`: inputs and
// targets are count x context int32 arrays (targets are the inputs shifted by one).
void fill_batch(const TokenDataset& data, const SampleOrder& order, uint64_t step,
                int64_t batch_size, int64_t first, int64_t count, int64_t context,
                int32_t* inputs, int32_t* targets);

}  // namespace dseek::data
