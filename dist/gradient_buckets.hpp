// How a data-parallel replica cuts its gradient buffer into buckets for the reduction:
// consecutive ranges of backward's finishing order (GptModel's
// gradient_ranges_in_backward_order) joined until a bucket reaches its byte budget, so a
// bucket can be reduced as soon as backward has finished its last range, while earlier
// layers are still being computed. Each bucket is split across the replicas by the data
// plane's shard rule (comm::shard_offset / shard_count): replica r's piece of every
// bucket together make its ZeRO shard, the part of the buffer whose reduced gradient
// and optimizer state it owns. Pure arithmetic; every replica computes the same plan.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/model/param_layout.hpp"

namespace dseek::dist {

struct GradientBucket {
  model::ParamRange range;   // in the flat buffer
  size_t first_unit = 0;     // its ranges: backward_order[first_unit, first_unit + units)
  size_t units = 0;
  model::ParamRange piece;   // this replica's shard of the bucket (flat-buffer offsets)
  size_t piece_offset = 0;   // where the piece starts in the replica's packed shard
};

// Buckets in backward order. A range is never split: one larger than `bucket_bytes`
// is a bucket of its own, and ranges join only where they continue each other in the
// buffer. `backward_order` holds disjoint ranges of [0, total): the whole buffer for a
// data-parallel replica, the ranges it owns for a pipeline stage's chunk (the rest of
// its buffer is not reduced). Throws std::invalid_argument when ranges overlap, are
// empty or lie outside the buffer, or the rank is outside [0, world_size).
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<model::ParamRange>& backward_order,
                                                  size_t total, size_t bucket_bytes, int rank,
                                                  int world_size);

// The pieces of `buckets`, in bucket order: the replica's shard.
std::vector<model::ParamRange> shard_of(const std::vector<GradientBucket>& buckets);

}  // namespace dseek::dist
