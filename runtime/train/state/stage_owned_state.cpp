// This rank's own state, without communication (PipelineStageTrainer::copy_owned_state,
// restore_owned_state): every chunk's owned floats (owned_segments: the head's copy of
// wte and a tensor rank's replicated tensors included) of the parameters and of both
// AdamW moments, packed chunk by chunk. What a rank keeps in memory between epochs
// (state/stage_memory.hpp) and hands to a replica of its stage that has none; a rank at
// the same position of the same layout packs and unpacks the same floats in the same
// order. Under ZeRO the moments are valid on this replica's pieces only
// (owned_state_moments); the rest of the moment parts is left as it was, and a restore
// reads back only what the optimizer holds, so a state put together from every
// replica's pieces (dist/stage_memory_sync.hpp) restores any replica.
#include <algorithm>

#include "runtime/train/pipeline/stage_chunk.hpp"

namespace dseek::train {

size_t PipelineStageTrainer::owned_state_floats() const {
  size_t floats = 0;
  for (const auto& chunk : chunks_)
    for (const model::ShardSegment& s : chunk->model->owned_segments()) floats += s.count;
  return 3 * floats;
}

// Every step (state/stage_memory.hpp keeps it): the parameters straight from the
// backend, the moments through host scratch allocated once.
std::vector<model::ParamRange> PipelineStageTrainer::owned_state_moments() const {
  std::vector<model::ParamRange> held;
  size_t base = 0;
  for (const auto& chunk : chunks_) {
    const auto segments = chunk->model->owned_segments();
    size_t owned = 0;
    for (const model::ShardSegment& s : segments) owned += s.count;
    // The moment parts (m at base + owned, v after it) of the floats the optimizer holds:
    // each of its ranges cut by the segments it falls in, at their packed places.
    for (size_t part = 1; part <= 2; ++part) {
      size_t packed_at = base + part * owned;
      for (const model::ShardSegment& s : segments) {
        for (const model::ParamRange& r : chunk->updated) {
          const size_t begin = std::max(r.offset, s.shard_offset);
          const size_t end = std::min(r.offset + r.count, s.shard_offset + s.count);
          if (begin < end) held.push_back({packed_at + (begin - s.shard_offset), end - begin});
        }
        packed_at += s.count;
      }
    }
    base += 3 * owned;
  }
  std::sort(held.begin(), held.end(),
            [](const model::ParamRange& a, const model::ParamRange& b) { return a.offset < b.offset; });
  return held;
}

void PipelineStageTrainer::copy_owned_state(float* packed) {
  finish_update();
  for (auto& chunk : chunks_) {
    const size_t floats = chunk->model->buffer_floats();
    const auto segments = chunk->model->owned_segments();
    for (const model::ShardSegment& s : segments) {
      backend_->copy_to_host(packed, chunk->model->params() + s.shard_offset, s.count * sizeof(float));
      packed += s.count;
    }
    // A rank whose segments tile its whole buffer in order (no tensor split, no shared
    // wte) packs the moments as they are: straight into place.
    size_t tiled = 0;
    for (const model::ShardSegment& s : segments) tiled = s.shard_offset == tiled ? tiled + s.count : floats + 1;
    if (tiled == floats) {
      chunk->optimizer->moments_to_host(packed, packed + floats);
      packed += 2 * floats;
      continue;
    }
    if (moments_scratch_.size() < 2 * floats) moments_scratch_.assign(2 * floats, 0.0f);
    float* host_m = moments_scratch_.data();
    float* host_v = host_m + floats;
    chunk->optimizer->moments_to_host(host_m, host_v);
    for (const float* part : {host_m, host_v})
      for (const model::ShardSegment& s : segments) packed = std::copy_n(part + s.shard_offset, s.count, packed);
  }
}

void PipelineStageTrainer::restore_owned_state(const float* packed, int64_t optimizer_steps) {
  finish_update();
  for (auto& chunk : chunks_) {
    chunk->update->forget_host_params();
    const size_t floats = chunk->model->buffer_floats();
    std::vector<float> host_params(floats), host_m(floats, 0.0f), host_v(floats, 0.0f);
    backend_->copy_to_host(host_params.data(), chunk->model->params(), floats * sizeof(float));
    for (std::vector<float>* part : {&host_params, &host_m, &host_v})
      for (const model::ShardSegment& s : chunk->model->owned_segments()) {
        std::copy_n(packed, s.count, part->begin() + static_cast<std::ptrdiff_t>(s.shard_offset));
        packed += s.count;
      }
    backend_->copy_from_host(chunk->model->params(), host_params.data(), floats * sizeof(float));
    chunk->optimizer->moments_from_host(host_m.data(), host_v.data());
    chunk->optimizer->set_steps_taken(optimizer_steps);
  }
}

}  // namespace dseek::train
