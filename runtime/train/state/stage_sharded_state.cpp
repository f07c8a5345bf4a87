// The checkpoint side of PipelineStageTrainer (pipeline/stage_trainer.hpp) when its
// chunks are tensor-parallel shards: gathering the whole model state (params, AdamW
// moments) to stage 0's tensor rank 0, and restoring a rank's shards from a whole state
// written by any layout. Without tensor parallelism the stages send their ranges to
// stage 0 point to point (pipeline/stage_trainer.cpp).
#include <algorithm>
#include <span>
#include <stdexcept>

#include "runtime/train/pipeline/stage_chunk.hpp"

namespace dseek::train {

void PipelineStageTrainer::gather_sharded_state_to_first(float* params, float* adam_m,
                                                         float* adam_v) {
  const bool writer = gathers_state();
  if (writer != (params != nullptr && adam_m != nullptr && adam_v != nullptr))
    throw std::logic_error(
        "gather_state_to_first: stage 0's tensor rank 0, and only it, passes buffers");
  const size_t total = whole_layout_.total();
  std::vector<float> scratch(writer ? 0 : 3 * total);
  float* const whole[3] = {writer ? params : scratch.data(),
                           writer ? adam_m : scratch.data() + total,
                           writer ? adam_v : scratch.data() + 2 * total};
  for (float* part : whole) std::fill_n(part, total, -0.0f);
  for (auto& chunk : chunks_) {
    const size_t floats = chunk->model->buffer_floats();
    std::vector<float> host_params(floats), host_m(floats, 0.0f), host_v(floats, 0.0f);
    backend_->copy_to_host(host_params.data(), chunk->model->params(), floats * sizeof(float));
    moments_to_host(*chunk, host_m.data(), host_v.data());
    const std::vector<float>* sources[3] = {&host_params, &host_m, &host_v};
    for (int part = 0; part < 3; ++part)
      for (const model::ShardSegment& s : chunk->whole_segments)
        std::copy_n(sources[part]->begin() + static_cast<std::ptrdiff_t>(s.shard_offset), s.count,
                    whole[part] + s.whole_offset);
  }
  // Each float has one owner: every other rank adds -0.0, so both sums are exact.
  for (float* part : whole) {
    tensor_->all_reduce_sum(part, total);
    links_.sum_over_stages(std::span<float>(part, total));
  }
}

void PipelineStageTrainer::restore_sharded_state(const float* params, const float* adam_m,
                                                 const float* adam_v, int64_t optimizer_steps) {
  for (auto& chunk : chunks_) {
    const size_t floats = chunk->model->buffer_floats();
    std::vector<float> host_params(floats), host_m(floats, 0.0f), host_v(floats, 0.0f);
    backend_->copy_to_host(host_params.data(), chunk->model->params(), floats * sizeof(float));
    // The last stage's copy of wte takes the embedding's values and moments: both
    // copies saw the same summed gradients from the same start, so they are equal.
    for (const model::ShardSegment& s : chunk->model->owned_segments()) {
      std::copy_n(params + s.whole_offset, s.count, host_params.begin() + static_cast<std::ptrdiff_t>(s.shard_offset));
      std::copy_n(adam_m + s.whole_offset, s.count, host_m.begin() + static_cast<std::ptrdiff_t>(s.shard_offset));
      std::copy_n(adam_v + s.whole_offset, s.count, host_v.begin() + static_cast<std::ptrdiff_t>(s.shard_offset));
    }
    backend_->copy_from_host(chunk->model->params(), host_params.data(), floats * sizeof(float));
    chunk->optimizer->moments_from_host(host_m.data(), host_v.data());
    chunk->optimizer->set_steps_taken(optimizer_steps);
  }
}

}  // namespace dseek::train
