// Implementation of chunk.hpp. With tensor size 1 the chunk's ranges are the whole
// model's own, counted, gathered and updated as they are; a tensor rank's are cut into
// the shard's segments (model/tensor_parallel_layout.hpp), which say which whole-model
// floats each holds, whether they are replicated over the group (counted once in the
// norm, given by rank 0 when the model is put together) or split (summed over the
// group), and which whole-model tensor, hence which weight-decay setting, they are of.
// The two are kept apart because the segments of tensor size 1 would sum the norm's
// squares in another order, which would change its bits.
#include "runtime/train/pipeline/chunk.hpp"

#include <algorithm>
#include <iterator>

#include "runtime/model/precision_policy.hpp"

namespace dseek::train {

PipelineChunk::PipelineChunk(const ChunkSpec& spec, backend::Backend& backend,
                             model::TensorGroup* tensor_group)
    : model_(spec.shape, spec.range, backend, spec.micro_batch_size, spec.activation_slots,
             spec.recompute, tensor_group) {
  if (spec.real_vocab > 0) model_.set_real_vocab(spec.real_vocab);
  model_.init_weights(spec.seed, spec.init_std);
  model_.set_precision(model::PrecisionPolicy(backend, model::matmul_format_of(spec.precision),
                                              spec.shape.layers, spec.fp8));
}

double PipelineChunk::forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  return model_.forward(tokens, targets, B, T);
}

void PipelineChunk::backward(float dloss, const model::GradientsReady& on_ready) {
  model_.backward(dloss, on_ready);
}

model::ParamRange PipelineChunk::tied_wte() const {
  const model::TensorParallelLayout& shard = model_.shard();
  return {shard.wte(), static_cast<size_t>(shard.vocab_local() * shard.whole().shape().dim)};
}

std::vector<model::ShardSegment> PipelineChunk::segments_in(const model::ParamRange& range) const {
  std::vector<model::ShardSegment> inside;
  for (const model::ShardSegment& segment : model_.shard().segments())
    if (segment.shard_offset >= range.offset && segment.shard_offset < range.end())
      inside.push_back(segment);
  return inside;
}

std::vector<model::ShardSegment> PipelineChunk::counted_segments() const {
  std::vector<model::ShardSegment> counted;
  for (const model::ParamRange& range : owned_ranges()) {
    if (is_head_copy_of_wte(range)) continue;
    const auto inside = segments_in(range);
    counted.insert(counted.end(), inside.begin(), inside.end());
  }
  return counted;
}

ChunkNormRanges PipelineChunk::norm_ranges() const {
  ChunkNormRanges ranges;
  if (model_.tensor_ranks() == 1) {
    for (const model::ParamRange& r : owned_ranges())
      if (!is_head_copy_of_wte(r)) ranges.local.push_back(r);
    return ranges;
  }
  for (const model::ShardSegment& segment : counted_segments()) {
    const bool replicated = model_.shard().replicated(segment.shard_offset);
    auto& into = replicated ? ranges.local : ranges.group_split;
    into.push_back({segment.shard_offset, segment.count});
  }
  return ranges;
}

std::vector<model::ShardSegment> PipelineChunk::whole_model_segments() const {
  std::vector<model::ShardSegment> segments;
  if (model_.tensor_ranks() == 1) {
    for (const model::ParamRange& r : owned_ranges())
      if (!is_head_copy_of_wte(r)) segments.push_back({r.offset, r.offset, r.count});
    return segments;
  }
  const model::TensorParallelLayout& shard = model_.shard();
  for (const model::ShardSegment& segment : counted_segments())
    if (shard.rank() == 0 || !shard.replicated(segment.shard_offset)) segments.push_back(segment);
  return segments;
}

std::vector<model::ShardSegment> PipelineChunk::owned_segments() const {
  std::vector<model::ShardSegment> segments;
  for (const model::ParamRange& range : owned_ranges()) {
    if (model_.tensor_ranks() == 1) {
      segments.push_back({range.offset, range.offset, range.count});
      continue;
    }
    const auto inside = segments_in(range);
    segments.insert(segments.end(), inside.begin(), inside.end());
  }
  return segments;
}

std::unique_ptr<OptimizerShards> PipelineChunk::make_optimizer(
    backend::Backend& backend, const optim::AdamWSettings& settings,
    const OptimizerShardsFactory& factory, const std::vector<model::ParamRange>* only) const {
  const model::ParamLayout& whole = model_.layout();
  if (model_.tensor_ranks() == 1)
    return make_optimizer_of(factory, OptimizerSpec{backend, whole, settings,
                                                    only != nullptr ? *only : owned_ranges(),
                                                    backend.host_memory()});
  // The shard's buffer is no ParamLayout: the decay travels with each range.
  const auto& tensors = whole.tensors();
  std::vector<optim::DecayRange> owned;
  for (const model::ParamRange& range : owned_ranges())
    for (const model::ShardSegment& segment : segments_in(range)) {
      // The whole-model tensor holding the segment (a segment never crosses tensors).
      auto it = std::upper_bound(tensors.begin(), tensors.end(), segment.whole_offset,
                                 [](size_t offset, const model::ParamTensor& t) {
                                   return offset < t.offset;
                                 });
      const bool decay = std::prev(it)->decay;
      if (only == nullptr) {
        owned.push_back({{segment.shard_offset, segment.count}, decay});
        continue;
      }
      for (const model::ParamRange& piece : *only) {  // ZeRO: the segment's parts in pieces
        const size_t begin = std::max(piece.offset, segment.shard_offset);
        const size_t end = std::min(piece.end(), segment.shard_offset + segment.count);
        if (begin < end) owned.push_back({{begin, end - begin}, decay});
      }
    }
  OptimizerSpec spec{backend, whole, settings, {}, backend.host_memory(), owned};
  for (const optim::DecayRange& range : owned) spec.owned.push_back(range.range);
  return make_optimizer_of(factory, spec);
}

}  // namespace dseek::train
