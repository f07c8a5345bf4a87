// Greedy, temperature, top-k and top-p sampling; see sampler.hpp.
#include "runtime/infer/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dseek::infer {

void check_sampling(const SamplingSettings& s) {
  if (!(s.temperature >= 0.0) || !std::isfinite(s.temperature))
    throw std::invalid_argument("--temperature must be >= 0 (0: greedy), not " +
                                std::to_string(s.temperature));
  if (s.top_k < 0) throw std::invalid_argument("--top-k must be >= 0 (0: off)");
  if (!(s.top_p > 0.0 && s.top_p <= 1.0))
    throw std::invalid_argument("--top-p must be in (0, 1] (1: off), not " +
                                std::to_string(s.top_p));
}

Sampler::Sampler(const SamplingSettings& settings) : settings_(settings), rng_(settings.seed) {
  check_sampling(settings);
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t Sampler::next(std::span<const float> logits) {
  if (settings_.temperature == 0.0) return argmax(logits);
  const size_t V = logits.size();
  // The candidates, most likely first (ties: the lower id first, so the order is total).
  order_.resize(V);
  for (size_t i = 0; i < V; ++i) order_[i] = static_cast<int32_t>(i);
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = V;
  if (settings_.top_k > 0 && static_cast<size_t>(settings_.top_k) < V) {
    keep = static_cast<size_t>(settings_.top_k);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(keep),
                      order_.end(), more_likely);
  } else {
    std::sort(order_.begin(), order_.end(), more_likely);
  }
  // Softmax of logits / temperature over the kept candidates, in double.
  const double top = logits[order_[0]];
  weights_.resize(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    weights_[i] = std::exp((logits[order_[i]] - top) / settings_.temperature);
    total += weights_[i];
  }
  if (settings_.top_p < 1.0) {
    double mass = 0.0;
    size_t nucleus = 0;
    while (nucleus < keep) {
      mass += weights_[nucleus++] / total;
      if (mass >= settings_.top_p) break;
    }
    keep = nucleus;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += weights_[i];
  }
  // A uniform draw in [0, total): 53 random bits, the same on every platform (unlike
  // std::uniform_real_distribution, whose algorithm the standard leaves open).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    sum += weights_[i];
    if (u < sum) return order_[i];
  }
  return order_[keep - 1];
}

}  // namespace dseek::infer
