// Implementation of gradient_buckets.hpp.
#include "dist/gradient_buckets.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "comm/group.hpp"

namespace dseek::dist {

namespace {
std::string show(const model::ParamRange& range) {
  return "[" + std::to_string(range.offset) + ", " + std::to_string(range.end()) + ")";
}

// Disjoint, non-empty ranges inside [0, total): a partition for a data-parallel
// replica's whole model, the ranges a pipeline stage owns for one of its chunks.
void check_disjoint(const std::vector<model::ParamRange>& ranges, size_t total) {
  std::vector<model::ParamRange> sorted = ranges;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  size_t next = 0;
  for (const auto& range : sorted) {
    if (range.offset < next || range.count == 0)
      throw std::invalid_argument("gradient ranges overlap or are empty: " + show(range) +
                                  " starts before " + std::to_string(next));
    next = range.end();
  }
  if (next > total)
    throw std::invalid_argument("gradient ranges reach " + std::to_string(next) + ", past the " +
                                std::to_string(total) + " floats of the buffer");
}

// `range` continues `bucket` on either side (backward goes down the layout, but any
// contiguous order works).
bool adjacent(const model::ParamRange& bucket, const model::ParamRange& range) {
  return range.end() == bucket.offset || bucket.end() == range.offset;
}
}  // namespace

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<model::ParamRange>& backward_order,
                                                  size_t total, size_t bucket_bytes, int rank,
                                                  int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside a world of " +
                                std::to_string(world_size));
  check_disjoint(backward_order, total);
  const size_t budget = std::max<size_t>(bucket_bytes / sizeof(float), 1);
  std::vector<GradientBucket> buckets;
  for (size_t i = 0; i < backward_order.size(); ++i) {
    const model::ParamRange& range = backward_order[i];
    if (!buckets.empty()) {
      GradientBucket& last = buckets.back();
      if (adjacent(last.range, range) && last.range.count + range.count <= budget) {
        last.range = {std::min(last.range.offset, range.offset), last.range.count + range.count};
        ++last.units;
        continue;
      }
    }
    buckets.push_back(GradientBucket{range, i, 1, {}, 0});
  }
  size_t packed = 0;
  for (auto& bucket : buckets) {
    const size_t n = bucket.range.count;
    bucket.piece = {bucket.range.offset + comm::shard_offset(n, world_size, rank),
                    comm::shard_count(n, world_size, rank)};
    bucket.piece_offset = packed;
    packed += bucket.piece.count;
  }
  return buckets;
}

std::vector<model::ParamRange> shard_of(const std::vector<GradientBucket>& buckets) {
  std::vector<model::ParamRange> shard;
  for (const auto& bucket : buckets)
    if (bucket.piece.count > 0) shard.push_back(bucket.piece);
  return shard;
}

}  // namespace dseek::dist
