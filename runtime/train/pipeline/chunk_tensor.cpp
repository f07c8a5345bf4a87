// The tensor-parallel chunk of a pipeline stage (parallel.pipeline > 1 with
// parallel.tensor > 1): PipelineChunk over this tensor rank's TensorParallelGpt shard of
// the chunk's layer range. Its ranges are in the shard's buffer
// (model/tensor_parallel_layout.hpp); the layout's segments say which whole-model
// floats each holds, whether they are replicated over the group (counted once in the
// norm, given by rank 0 when the model is put together) or split (summed over the
// group), and which whole-model tensor, hence which weight-decay setting, they are of.
// Precision: train.precision, through the shard's PrecisionPolicy
// (model/tensor_parallel_gpt.hpp says what each rank's FP8 scaling covers).
#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "runtime/model/precision_policy.hpp"
#include "runtime/model/tensor_parallel_gpt.hpp"
#include "runtime/train/pipeline/chunk.hpp"
#include "runtime/train/pipeline/model_chunk.hpp"

namespace dseek::train {

namespace {

class TensorParallelChunk final : public ModelChunk<model::TensorParallelGpt> {
 public:
  TensorParallelChunk(const ChunkSpec& spec, backend::Backend& backend, model::TensorGroup& group)
      : ModelChunk(spec.shape, spec.range, group, backend, spec.micro_batch_size,
               spec.activation_slots, spec.recompute),
        rank_(group.rank()) {
    model_.init_weights(spec.seed, spec.init_std);
    model_.set_precision(model::PrecisionPolicy(backend, model::matmul_format_of(spec.precision),
                                                spec.shape.layers, spec.fp8));
  }

  // In GptModel's backward order: lnf, the blocks from the last, then the embedding
  // (wte rows, wpe: adjacent in the shard) or the head's wte rows.
  std::vector<model::ParamRange> owned_ranges() const override {
    const model::TensorParallelLayout& layout = model_.layout();
    const model::GptShape& s = layout.whole().shape();
    const size_t C = static_cast<size_t>(s.dim);
    std::vector<model::ParamRange> ranges;
    if (model_.has_head()) ranges.push_back({layout.lnf_w(), layout.lnf_b() + C - layout.lnf_w()});
    for (int64_t l = model_.range().end - 1; l >= model_.range().begin; --l) {
      const model::BlockParams& b = layout.block(l);
      ranges.push_back({b.ln1_w, b.fc_proj_b + C - b.ln1_w});  // a block is contiguous
    }
    if (model_.has_embedding())
      ranges.push_back({layout.wte(), layout.wpe() + static_cast<size_t>(s.context) * C - layout.wte()});
    else if (model_.has_head())
      ranges.push_back(tied_wte());
    return ranges;
  }
  model::ParamRange tied_wte() const override {
    const model::TensorParallelLayout& layout = model_.layout();
    return {layout.wte(),
            static_cast<size_t>(layout.vocab_local() * layout.whole().shape().dim)};
  }
  ChunkNormRanges norm_ranges() const override {
    const model::TensorParallelLayout& layout = model_.layout();
    ChunkNormRanges ranges;
    for (const model::ShardSegment& segment : counted_segments()) {
      auto& into = layout.replicated(segment.shard_offset) ? ranges.local : ranges.group_split;
      into.push_back({segment.shard_offset, segment.count});
    }
    return ranges;
  }
  std::vector<model::ShardSegment> whole_model_segments() const override {
    const model::TensorParallelLayout& layout = model_.layout();
    std::vector<model::ShardSegment> segments;
    for (const model::ShardSegment& segment : counted_segments())
      if (rank_ == 0 || !layout.replicated(segment.shard_offset)) segments.push_back(segment);
    return segments;
  }
  std::vector<model::ShardSegment> owned_segments() const override {
    std::vector<model::ShardSegment> segments;
    for (const model::ParamRange& range : owned_ranges()) {
      const auto inside = segments_in(range);
      segments.insert(segments.end(), inside.begin(), inside.end());
    }
    return segments;
  }
  std::unique_ptr<OptimizerShards> make_optimizer(
      backend::Backend& backend, const optim::AdamWSettings& settings,
      const OptimizerShardsFactory& factory,
      const std::vector<model::ParamRange>* only) const override {
    const model::TensorParallelLayout& layout = model_.layout();
    const auto& tensors = layout.whole().tensors();
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
    // The shard's buffer is no ParamLayout: the decay travels with each range.
    OptimizerSpec spec{backend, layout.whole(), settings, {}, backend.host_memory(), owned};
    for (const optim::DecayRange& range : owned) spec.owned.push_back(range.range);
    return make_optimizer_of(factory, spec);
  }

 private:
  // The layout's segments inside `range` (segments never straddle an owned range).
  std::vector<model::ShardSegment> segments_in(const model::ParamRange& range) const {
    std::vector<model::ShardSegment> inside;
    for (const model::ShardSegment& segment : model_.layout().segments())
      if (segment.shard_offset >= range.offset && segment.shard_offset < range.end())
        inside.push_back(segment);
    return inside;
  }
  // The segments of the owned ranges less the head's copy of wte.
  std::vector<model::ShardSegment> counted_segments() const {
    std::vector<model::ShardSegment> counted;
    for (const model::ParamRange& range : owned_ranges()) {
      if (!model_.has_embedding() && range == tied_wte()) continue;
      const auto inside = segments_in(range);
      counted.insert(counted.end(), inside.begin(), inside.end());
    }
    return counted;
  }

  int rank_;
};

}  // namespace

std::unique_ptr<PipelineChunk> make_tensor_parallel_chunk(const ChunkSpec& spec,
                                                          backend::Backend& backend,
                                                          model::TensorGroup& group) {
  return std::make_unique<TensorParallelChunk>(spec, backend, group);
}

}  // namespace dseek::train
