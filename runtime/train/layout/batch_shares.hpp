// How a step's global batch is shared out over the data-parallel replicas, in whole
// micro-batches (data.balance): equal shares, or shares in proportion to each
// replica's measured speed (data.balance = "throughput"). The shares are consecutive
// runs in replica order, so the global batch is the same whatever they are, and every
// micro-batch has the same number of sequences, so weighting each micro-batch's loss by
// 1 / (the batch's micro-batches) keeps the gradient the exact token mean of the batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dseek::train {

struct BatchShares {
  std::vector<int64_t> micro_batches;  // per replica, each >= 1

  int64_t total() const;
  // The first micro-batch of `replica`'s run.
  int64_t first(int replica) const;
  bool operator==(const BatchShares&) const = default;
};

// `total` micro-batches as even as possible, the first total % replicas replicas one
// more. Throws std::invalid_argument when a replica would get none.
BatchShares even_shares(int64_t total, int replicas);

// `total` micro-batches in proportion to `speeds` (a replica's micro-batches per
// second, > 0), at least one each; the remainders go to the largest fractions (ties:
// the lower replica). A pure function: replicas given the same speeds agree.
BatchShares throughput_shares(int64_t total, std::span<const double> speeds);

}  // namespace dseek::train
