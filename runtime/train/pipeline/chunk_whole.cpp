// The whole-model chunk of a pipeline stage (parallel.tensor = 1): PipelineChunk over a
// GptModel running the chunk's layer range, with the precision of train.precision.
// Also make_pipeline_chunk, which picks this or the tensor-parallel shard
// (pipeline/chunk_tensor.cpp).
#include <stdexcept>

#include "runtime/model/precision_policy.hpp"
#include "runtime/train/pipeline/chunk.hpp"
#include "runtime/train/pipeline/model_chunk.hpp"

namespace dseek::train {

namespace {

class WholeModelChunk final : public ModelChunk<model::GptModel> {
 public:
  WholeModelChunk(const ChunkSpec& spec, backend::Backend& backend)
      : ModelChunk(spec.shape, spec.range, backend, spec.micro_batch_size, spec.activation_slots,
               spec.recompute) {
    model_.init_weights(spec.seed, spec.init_std);
    model_.set_precision(model::PrecisionPolicy(backend, model::matmul_format_of(spec.precision),
                                                spec.shape.layers, spec.fp8));
  }

  model::GptModel* whole_model() override { return &model_; }
  std::vector<model::ParamRange> owned_ranges() const override {
    return model_.gradient_ranges_in_backward_order();
  }
  model::ParamRange tied_wte() const override {
    const model::GptShape& s = model_.layout().shape();
    return {model_.layout().wte(), static_cast<size_t>(s.vocab * s.dim)};
  }
  ChunkNormRanges norm_ranges() const override {
    ChunkNormRanges ranges;
    for (const model::ParamRange& r : owned_ranges())
      if (!is_head_copy_of_wte(r)) ranges.local.push_back(r);
    return ranges;
  }
  std::vector<model::ShardSegment> whole_model_segments() const override {
    std::vector<model::ShardSegment> segments;
    for (const model::ParamRange& r : owned_ranges())
      if (!is_head_copy_of_wte(r)) segments.push_back({r.offset, r.offset, r.count});
    return segments;
  }
  std::vector<model::ShardSegment> owned_segments() const override {
    std::vector<model::ShardSegment> segments;
    for (const model::ParamRange& r : owned_ranges()) segments.push_back({r.offset, r.offset, r.count});
    return segments;
  }
  std::unique_ptr<OptimizerShards> make_optimizer(
      backend::Backend& backend, const optim::AdamWSettings& settings,
      const OptimizerShardsFactory& factory,
      const std::vector<model::ParamRange>* only) const override {
    return make_optimizer_of(
        factory, OptimizerSpec{backend, model_.layout(), settings,
                               only != nullptr ? *only : owned_ranges(), backend.host_memory()});
  }

 private:
  // The head's wte is the embedding's, counted and gathered by the first range.
  bool is_head_copy_of_wte(const model::ParamRange& r) const {
    return !model_.has_embedding() && r == tied_wte();
  }
};

}  // namespace

std::unique_ptr<PipelineChunk> make_pipeline_chunk(const ChunkSpec& spec, backend::Backend& backend,
                                                   model::TensorGroup* tensor_group) {
  if (tensor_group != nullptr && tensor_group->size() > 1)
    return make_tensor_parallel_chunk(spec, backend, *tensor_group);
  return std::make_unique<WholeModelChunk>(spec, backend);
}

}  // namespace dseek::train
