// Implementation of partition.hpp.
#include "runtime/train/pipeline/partition.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

namespace dseek::train {

double range_cost(const LayerCosts& costs, const model::LayerRange& range) {
  double cost = 0.0;
  for (int64_t l = range.begin; l < range.end; ++l) {
    cost += costs.blocks[static_cast<size_t>(l)];
    if (!costs.recompute.empty() && costs.recompute_policy.recomputes(l - range.begin))
      cost += costs.recompute[static_cast<size_t>(l)];
  }
  if (range.begin == 0) cost += costs.embedding;
  if (range.end == static_cast<int64_t>(costs.blocks.size())) cost += costs.head;
  return cost;
}

std::vector<model::LayerRange> uniform_partition(int64_t layers, int64_t parts) {
  if (parts < 1 || layers < parts)
    throw std::invalid_argument("the pipeline needs at least one block per virtual stage: " +
                                std::to_string(layers) + " model.layers for " +
                                std::to_string(parts) +
                                " virtual stages (parallel.pipeline x parallel.virtual_stages)");
  std::vector<model::LayerRange> ranges;
  int64_t begin = 0;
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t count = layers / parts + (p < layers % parts ? 1 : 0);
    ranges.push_back({begin, begin + count});
    begin += count;
  }
  return ranges;
}

std::vector<model::LayerRange> balanced_partition(const LayerCosts& costs, int64_t parts) {
  const int64_t L = static_cast<int64_t>(costs.blocks.size());
  uniform_partition(L, parts);  // the same precondition, the same message
  // best[p][e]: the smallest possible max cost of cutting blocks [0, e) into p ranges;
  // cut[p][e]: where the last of those ranges begins.
  const double inf = std::numeric_limits<double>::infinity();
  const auto P = static_cast<size_t>(parts);
  const auto Ls = static_cast<size_t>(L);
  std::vector<std::vector<double>> best(P + 1, std::vector<double>(Ls + 1, inf));
  std::vector<std::vector<int64_t>> cut(P + 1, std::vector<int64_t>(Ls + 1, 0));
  best[0][0] = 0.0;
  for (int64_t p = 1; p <= parts; ++p) {
    for (int64_t e = p; e <= L; ++e) {
      for (int64_t b = p - 1; b < e; ++b) {
        const double prior = best[static_cast<size_t>(p - 1)][static_cast<size_t>(b)];
        if (prior == inf) continue;
        const double candidate = std::max(prior, range_cost(costs, {b, e}));
        if (candidate < best[static_cast<size_t>(p)][static_cast<size_t>(e)]) {
          best[static_cast<size_t>(p)][static_cast<size_t>(e)] = candidate;
          cut[static_cast<size_t>(p)][static_cast<size_t>(e)] = b;
        }
      }
    }
  }
  std::vector<model::LayerRange> ranges(P);
  int64_t end = L;
  for (int64_t p = parts; p >= 1; --p) {
    const int64_t begin = cut[static_cast<size_t>(p)][static_cast<size_t>(end)];
    ranges[static_cast<size_t>(p - 1)] = {begin, end};
    end = begin;
  }
  return ranges;
}

namespace {
using Clock = std::chrono::steady_clock;

// Forward + backward of one range on a fixed micro-batch, in ms: one run after a
// warm-up run (which page-faults the fresh buffers in). The weights are zeros: dense
// kernels take the same time whatever the values, and no init pass over the whole
// layout is paid per part.
double time_range(const model::GptShape& shape, backend::Backend& backend, model::LayerRange range,
                  int64_t B, model::RecomputePolicy recompute = {}) {
  model::GptModel part(shape, range, backend, B, 1, recompute);
  backend.zero(part.params(), part.num_params());
  const size_t BT = static_cast<size_t>(B * shape.context);
  std::vector<int32_t> tokens(BT);
  for (size_t i = 0; i < BT; ++i) tokens[i] = static_cast<int32_t>(i % static_cast<size_t>(shape.vocab));
  std::vector<float> activation(BT * static_cast<size_t>(shape.dim));
  for (size_t i = 0; i < activation.size(); ++i) activation[i] = static_cast<float>(i % 17) * 0.01f;
  double ms = 0.0;
  for (int run = 0; run < 2; ++run) {
    if (!part.has_embedding())
      backend.copy_from_host(part.stage_input(), activation.data(), activation.size() * sizeof(float));
    const auto start = Clock::now();
    part.forward(tokens.data(), tokens.data(), B, shape.context);
    if (!part.has_head())
      backend.copy_from_host(part.stage_output_grad(), activation.data(),
                             activation.size() * sizeof(float));
    part.backward(1.0f / static_cast<float>(BT));
    ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }
  return ms;
}
}  // namespace

LayerCosts profile_layer_costs(const model::GptShape& shape, backend::Backend& backend,
                               int64_t micro_batch, int repetitions, model::RecomputePolicy recompute) {
  // Empty ranges at 0 and at L are the embedding alone and the head alone (GptModel).
  std::vector<model::LayerRange> parts{{0, 0}};
  for (int64_t l = 0; l < shape.layers; ++l) parts.push_back({l, l + 1});
  parts.push_back({shape.layers, shape.layers});
  // Repetitions go round all the parts, and each part keeps its fastest: a burst of
  // other work on the machine slows one round of every part rather than every round of
  // a few parts (which would skew the split towards them).
  // Under recompute, every block again with its one block recomputed ("every:1" of a
  // one-block range), in the same rounds.
  const auto L = static_cast<size_t>(shape.layers);
  std::vector<double> fastest(parts.size(), std::numeric_limits<double>::infinity());
  std::vector<double> fastest_recomputed(recompute.any() ? L : 0, std::numeric_limits<double>::infinity());
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    for (size_t i = 0; i < parts.size(); ++i)
      fastest[i] = std::min(fastest[i], time_range(shape, backend, parts[i], micro_batch));
    for (size_t l = 0; l < fastest_recomputed.size(); ++l)
      fastest_recomputed[l] = std::min(fastest_recomputed[l],
                                       time_range(shape, backend, parts[1 + l], micro_batch, model::RecomputePolicy{1}));
  }
  LayerCosts costs;
  costs.embedding = fastest.front();
  costs.blocks.assign(fastest.begin() + 1, fastest.end() - 1);
  costs.head = fastest.back();
  if (recompute.any()) {
    costs.recompute_policy = recompute;
    for (size_t l = 0; l < L; ++l) costs.recompute.push_back(std::max(0.0, fastest_recomputed[l] - costs.blocks[l]));
  }
  return costs;
}

std::string describe_partition(const std::vector<model::LayerRange>& ranges) {
  std::string text;
  for (const auto& range : ranges) {
    if (!text.empty()) text += ' ';
    // Separate appends: GCC 12 warns (-Wrestrict) on "[" + std::to_string(...).
    text += '[';
    text += std::to_string(range.begin);
    text += ',';
    text += std::to_string(range.end);
    text += ')';
  }
  return text;
}

}  // namespace dseek::train
