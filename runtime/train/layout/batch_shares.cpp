// Implementation of batch_shares.hpp.
#include "runtime/train/layout/batch_shares.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace dseek::train {

int64_t BatchShares::total() const {
  return std::accumulate(micro_batches.begin(), micro_batches.end(), int64_t{0});
}

int64_t BatchShares::first(int replica) const {
  return std::accumulate(micro_batches.begin(), micro_batches.begin() + replica, int64_t{0});
}

namespace {
void require_one_each(int64_t total, size_t replicas) {
  if (replicas == 0 || total < static_cast<int64_t>(replicas))
    throw std::invalid_argument(std::to_string(total) + " micro-batches cannot give each of " +
                                std::to_string(replicas) + " replicas one");
}
}  // namespace

BatchShares even_shares(int64_t total, int replicas) {
  require_one_each(total, static_cast<size_t>(std::max(replicas, 0)));
  BatchShares shares;
  for (int r = 0; r < replicas; ++r)
    shares.micro_batches.push_back(total / replicas + (r < total % replicas ? 1 : 0));
  return shares;
}

BatchShares throughput_shares(int64_t total, std::span<const double> speeds) {
  const size_t n = speeds.size();
  require_one_each(total, n);
  for (double speed : speeds)
    if (!(speed > 0) || !std::isfinite(speed))
      throw std::invalid_argument("throughput_shares: a replica's speed must be finite and > 0");
  // One each first; the rest in proportion to speed.
  const double sum = std::accumulate(speeds.begin(), speeds.end(), 0.0);
  const int64_t rest = total - static_cast<int64_t>(n);
  BatchShares shares;
  std::vector<double> fraction(n);
  int64_t given = 0;
  for (size_t r = 0; r < n; ++r) {
    const double exact = static_cast<double>(total) * speeds[r] / sum - 1.0;
    const int64_t whole = std::clamp<int64_t>(static_cast<int64_t>(std::floor(exact)), 0, rest);
    shares.micro_batches.push_back(1 + whole);
    fraction[r] = exact - static_cast<double>(whole);
    given += whole;
  }
  // What the floors left (or, when the floors of the shares above one overshoot, what
  // they took too much): by the largest fractions first, the lower replica on a tie.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return fraction[a] > fraction[b]; });
  for (size_t i = 0; given < rest; i = (i + 1) % n, ++given) ++shares.micro_batches[order[i]];
  for (size_t i = n; given > rest; --given) {
    do i = (i + n - 1) % n;
    while (shares.micro_batches[order[i]] <= 1);
    --shares.micro_batches[order[i]];
  }
  return shares;
}

}  // namespace dseek::train
