// Implementation of param_layout.hpp.
#include "runtime/model/param_layout.hpp"

#include <algorithm>

namespace dseek::model {

std::vector<ParamRange> ranges_within(const std::vector<ParamRange>& ranges,
                                      const std::vector<ParamRange>& pieces) {
  std::vector<ParamRange> inside;
  for (const ParamRange& range : ranges)
    for (const ParamRange& piece : pieces) {
      const size_t begin = std::max(range.offset, piece.offset);
      const size_t end = std::min(range.end(), piece.end());
      if (begin < end) inside.push_back({begin, end - begin});
    }
  return inside;
}

size_t ParamTensor::size() const {
  size_t n = 1;
  for (int64_t extent : shape) n *= static_cast<size_t>(extent);
  return n;
}

size_t ParamLayout::add(const std::string& name, std::vector<int64_t> shape, bool decay,
                        bool residual_projection) {
  ParamTensor tensor{name, total_, std::move(shape), decay, residual_projection};
  total_ += tensor.size();
  tensors_.push_back(std::move(tensor));
  return tensors_.back().offset;
}

ParamLayout::ParamLayout(const GptShape& shape) : shape_(shape) {
  const int64_t C = shape.dim;
  wte_ = add("wte", {shape.vocab, C}, true);
  wpe_ = add("wpe", {shape.context, C}, true);
  for (int64_t l = 0; l < shape.layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    BlockParams b{};
    b.ln1_w = add(p + "ln1.weight", {C}, false);
    b.ln1_b = add(p + "ln1.bias", {C}, false);
    b.qkv_w = add(p + "attn.qkv.weight", {3 * C, C}, true);
    b.qkv_b = add(p + "attn.qkv.bias", {3 * C}, false);
    b.attn_proj_w = add(p + "attn.proj.weight", {C, C}, true, true);
    b.attn_proj_b = add(p + "attn.proj.bias", {C}, false);
    b.ln2_w = add(p + "ln2.weight", {C}, false);
    b.ln2_b = add(p + "ln2.bias", {C}, false);
    b.fc_w = add(p + "mlp.fc.weight", {4 * C, C}, true);
    b.fc_b = add(p + "mlp.fc.bias", {4 * C}, false);
    b.fc_proj_w = add(p + "mlp.proj.weight", {C, 4 * C}, true, true);
    b.fc_proj_b = add(p + "mlp.proj.bias", {C}, false);
    blocks_.push_back(b);
  }
  lnf_w_ = add("lnf.weight", {C}, false);
  lnf_b_ = add("lnf.bias", {C}, false);
}

size_t ParamLayout::block_begin(int64_t layer) const {
  return blocks_[static_cast<size_t>(layer)].ln1_w;
}

size_t ParamLayout::block_end(int64_t layer) const {
  const int64_t C = shape_.dim;
  return blocks_[static_cast<size_t>(layer)].fc_proj_b + static_cast<size_t>(C);
}

}  // namespace dseek::model
