// Construction, the blocks' forward and backward, and the forward and backward of a
// range; see gpt_model.hpp. Each block's backward mirrors its forward line by line, in
// reverse, with this rank's widths and the all-reduces Megatron-LM places after each
// row-parallel forward and column-parallel backward (none without a group).
#include "runtime/model/gpt_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/backend/host_window.hpp"
#include "runtime/model/initial_value.hpp"

namespace dseek::model {

using backend::DeviceBuffer;
using backend::HostWindow;
using backend::MatmulFormat;
using backend::MatmulPrecision;

namespace {
template <class T>
size_t bytes_of(const DeviceBuffer<T>& buffer) {
  return buffer.size() * sizeof(T);
}
}  // namespace

GptModel::GptModel(const GptShape& shape, LayerRange range, backend::Backend& backend,
                   int64_t max_micro_batch, int64_t activation_slots, RecomputePolicy recompute,
                   TensorGroup* group)
    : shard_(shape, group != nullptr ? group->rank() : 0, group != nullptr ? group->size() : 1),
      range_(range),
      group_(group != nullptr && group->size() > 1 ? group : nullptr),
      backend_(backend),
      max_batch_(max_micro_batch),
      recompute_(recompute) {
  if (max_micro_batch < 1) throw std::invalid_argument("GptModel: max_micro_batch must be >= 1");
  if (range.begin < 0 || range.end > shape.layers || range.begin > range.end)
    throw std::invalid_argument("GptModel: layer range [" + std::to_string(range.begin) + ", " +
                                std::to_string(range.end) + ") is not inside [0, " +
                                std::to_string(shape.layers) + ")");
  if (shape.dim % shape.heads != 0)
    throw std::invalid_argument("GptModel: dim must be divisible by heads");
  if (activation_slots < 1) throw std::invalid_argument("GptModel: activation_slots must be >= 1");
  const size_t BT = static_cast<size_t>(max_micro_batch * shape.context);
  const size_t C = static_cast<size_t>(shape.dim);
  const size_t Cl = static_cast<size_t>(shard_.channels_local());
  const size_t att = backend.attention_state_floats(
      static_cast<int>(max_micro_batch), static_cast<int>(shape.context), static_cast<int>(Cl),
      static_cast<int>(shard_.heads_local()));
  params_ = DeviceBuffer<float>(backend, shard_.total());
  grads_ = DeviceBuffer<float>(backend, shard_.total());
  for (int64_t i = 0; i < activation_slots; ++i) slots_.push_back(make_forward_state(BT, att));
  slot_ = &slots_.front();
  if (recompute_.any() && range.end > range.begin) recomputed_ = make_block_activations(BT, att);
  real_vocab_ = shape.vocab;
  if (has_head() && group_ != nullptr) {
    max_slots_ = DeviceBuffer<float>(backend, BT * static_cast<size_t>(group_->size()));
    sums_and_targets_ = DeviceBuffer<float>(backend, 2 * BT);
  }
  dresidual_ = DeviceBuffer<float>(backend, BT * C);
  dwidth1_ = DeviceBuffer<float>(backend, BT * C);
  dqkv_ = DeviceBuffer<float>(backend, BT * 3 * Cl);
  dhidden_ = DeviceBuffer<float>(backend, BT * static_cast<size_t>(shard_.hidden_local()));
  branch_out_ = DeviceBuffer<float>(backend, BT * C);

  for (const ForwardState& state : slots_) {
    activation_memory_.kept += bytes_of(state.tokens) + bytes_of(state.targets);
    for (const auto& buffer : state.residual) activation_memory_.kept += bytes_of(buffer);
    for (const BlockActivations& a : state.blocks) activation_memory_.kept += block_bytes(a);
    for (const auto* buffer : {&state.lnf, &state.lnf_mean, &state.lnf_rstd, &state.logits,
                               &state.losses})
      activation_memory_.kept += bytes_of(*buffer);
  }
  activation_memory_.recompute = block_bytes(recomputed_);
  for (const auto* buffer : {&dresidual_, &dwidth1_, &dqkv_, &dhidden_, &branch_out_,
                             &max_slots_, &sums_and_targets_})
    activation_memory_.backward += bytes_of(*buffer);
  backward_ranges_ = ranges_in_backward_order();
}

void GptModel::set_real_vocab(int64_t real_vocab) {
  const int64_t vocab = layout().shape().vocab;
  if (real_vocab < 1 || real_vocab > vocab)
    throw std::invalid_argument("GptModel: the real vocabulary " + std::to_string(real_vocab) +
                                " is not in [1, model.vocab = " + std::to_string(vocab) + "]");
  real_vocab_ = real_vocab;
  // Without a group a padded vocabulary runs the vocabulary-parallel pieces at one rank
  // (gpt_model_ends.cpp), which need their buffers.
  if (has_head() && group_ == nullptr && real_vocab < vocab && sums_and_targets_.size() == 0) {
    const size_t BT = static_cast<size_t>(max_batch_ * layout().shape().context);
    max_slots_ = DeviceBuffer<float>(backend_, BT);
    sums_and_targets_ = DeviceBuffer<float>(backend_, 2 * BT);
    activation_memory_.backward += bytes_of(max_slots_) + bytes_of(sums_and_targets_);
  }
}

GptModel::ForwardState GptModel::make_forward_state(size_t BT, size_t att) {
  const size_t C = static_cast<size_t>(layout().shape().dim);
  auto& backend = backend_;
  ForwardState state;
  if (has_embedding()) state.tokens = DeviceBuffer<int32_t>(backend, BT);
  if (has_head()) state.targets = DeviceBuffer<int32_t>(backend, BT);
  for (int64_t l = range_.begin; l <= range_.end; ++l) state.residual.emplace_back(backend, BT * C);
  for (int64_t l = range_.begin; l < range_.end; ++l)
    state.blocks.push_back(recompute_.recomputes(l - range_.begin)
                               ? BlockActivations{}
                               : make_block_activations(BT, att));
  if (has_head()) {
    state.lnf = DeviceBuffer<float>(backend, BT * C);
    state.lnf_mean = DeviceBuffer<float>(backend, BT);
    state.lnf_rstd = DeviceBuffer<float>(backend, BT);
    state.logits = DeviceBuffer<float>(backend, BT * static_cast<size_t>(shard_.vocab_local()));
    state.losses = DeviceBuffer<float>(backend, BT);
  }
  return state;
}

GptModel::BlockActivations GptModel::make_block_activations(size_t BT, size_t att) {
  const size_t C = static_cast<size_t>(layout().shape().dim);
  const size_t Cl = static_cast<size_t>(shard_.channels_local());
  const size_t Hl = static_cast<size_t>(shard_.hidden_local());
  auto& backend = backend_;
  BlockActivations a;
  a.ln1 = DeviceBuffer<float>(backend, BT * C);
  a.ln1_mean = DeviceBuffer<float>(backend, BT);
  a.ln1_rstd = DeviceBuffer<float>(backend, BT);
  a.qkv = DeviceBuffer<float>(backend, BT * 3 * Cl);
  a.atty = DeviceBuffer<float>(backend, BT * Cl);
  a.att = DeviceBuffer<float>(backend, att);
  a.residual2 = DeviceBuffer<float>(backend, BT * C);
  a.ln2 = DeviceBuffer<float>(backend, BT * C);
  a.ln2_mean = DeviceBuffer<float>(backend, BT);
  a.ln2_rstd = DeviceBuffer<float>(backend, BT);
  a.fch = DeviceBuffer<float>(backend, BT * Hl);
  a.fch_gelu = DeviceBuffer<float>(backend, BT * Hl);
  return a;
}

size_t GptModel::block_bytes(const BlockActivations& a) {
  size_t bytes = 0;
  for (const auto* buffer : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.qkv, &a.atty, &a.att,
                             &a.residual2, &a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu})
    bytes += bytes_of(*buffer);
  return bytes;
}

GptModel::BlockActivations& GptModel::activations_of(size_t i) {
  return recompute_.recomputes(static_cast<int64_t>(i)) ? *recompute_set_ : slot_->blocks[i];
}

void GptModel::select_activation_slot(int64_t slot) {
  if (slot < 0 || slot >= activation_slots())
    throw std::out_of_range("GptModel: activation slot " + std::to_string(slot) + " of " +
                            std::to_string(activation_slots()));
  slot_ = &slots_[static_cast<size_t>(slot)];
  B_ = slot_->B;
  T_ = slot_->T;
}

void GptModel::share_recompute_scratch(GptModel& owner) {
  if (&owner == this || !recompute_.any() || range_.end == range_.begin) return;
  const GptShape& a = layout().shape();
  const GptShape& b = owner.layout().shape();
  const bool same_shape = a.dim == b.dim && a.heads == b.heads && a.context == b.context &&
                          max_batch_ == owner.max_batch_ && tensor_ranks() == owner.tensor_ranks();
  if (!same_shape || owner.recompute_set_ != &owner.recomputed_ ||
      block_bytes(owner.recomputed_) == 0)
    throw std::invalid_argument(
        "GptModel::share_recompute_scratch: the owner must recompute (model.recompute) with "
        "its own scratch set, the same shape, group size and micro-batch size");
  recompute_set_ = &owner.recomputed_;
  recomputed_ = BlockActivations{};
  activation_memory_.recompute = 0;
}

void GptModel::init_weights(uint64_t seed, double std) {
  const ParamLayout& whole = layout();
  const auto& tensors = whole.tensors();
  std::vector<float> host(shard_.total(), 0.0f);
  for (const ShardSegment& s : shard_.segments()) {
    // The whole-model tensor holding the segment (a segment never crosses tensors).
    auto it = std::upper_bound(tensors.begin(), tensors.end(), s.whole_offset,
                               [](size_t offset, const ParamTensor& t) {
                                 return offset < t.offset;
                               });
    const ParamTensor& tensor = *std::prev(it);
    for (size_t i = 0; i < s.count; ++i)
      host[s.shard_offset + i] =
          initial_value(tensor, s.whole_offset + i, seed, std, whole.shape().layers);
  }
  backend_.copy_from_host(params_.data(), host.data(), host.size() * sizeof(float));
}

void GptModel::zero_grads() { backend_.zero(grads_.data(), grads_.size()); }

void GptModel::all_reduce_on_backend(float* data, size_t count) {
  if (group_ == nullptr) return;
  if (group_->sums_backend_memory()) {
    backend_.finish_compute();
    group_->all_reduce_backend_sum(data, count);
    return;
  }
  HostWindow window(backend_, data, count, HostWindow::Access::update, host_scratch_);
  group_->all_reduce_sum(window.data(), count);
  window.write_back();
}

void GptModel::block_forward(int64_t layer, BlockActivations& a, const float* x, float* out) {
  const BlockParams& p = shard_.block(layer);
  const float* w = params_.data();
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout().shape().dim);
  const int Cl = static_cast<int>(shard_.channels_local());
  const int Hl = static_cast<int>(shard_.hidden_local());
  const int NHl = static_cast<int>(shard_.heads_local());
  const size_t NC = static_cast<size_t>(N) * C;
  const bool adds_bias = shard_.rank() == 0;  // a row-parallel bias, once in the sum
  auto& be = backend_;
  const MatmulPrecision qkv = precision_.block(layer, PrecisionPolicy::kQkv);
  const MatmulPrecision mlp_up = precision_.block(layer, PrecisionPolicy::kMlpUp);
  layernorm_for(qkv, a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, w + p.ln1_w,
                w + p.ln1_b, N, C);
  linear_forward(a.qkv.data(), a.ln1.data(), w + p.qkv_w, w + p.qkv_b, N, C, 3 * Cl, qkv);
  be.attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), static_cast<int>(B_),
                       static_cast<int>(T_), Cl, NHl, precision_.attention());
  be.mixed_matmul_forward(branch_out_.data(), a.atty.data(), w + p.attn_proj_w,
                          adds_bias ? w + p.attn_proj_b : nullptr, N, Cl, C,
                          precision_.block(layer, PrecisionPolicy::kAttentionProjection));
  all_reduce_on_backend(branch_out_.data(), NC);
  be.residual_forward(a.residual2.data(), x, branch_out_.data(), NC);
  layernorm_for(mlp_up, a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.residual2.data(),
                w + p.ln2_w, w + p.ln2_b, N, C);
  linear_forward(a.fch.data(), a.ln2.data(), w + p.fc_w, w + p.fc_b, N, C, Hl, mlp_up);
  // The GELU's output feeds the MLP's projection only (its backward reads fch).
  const MatmulPrecision mlp_down = precision_.block(layer, PrecisionPolicy::kMlpDown);
  gelu_for(mlp_down, a.fch_gelu.data(), a.fch.data(), static_cast<size_t>(N) * Hl);
  if (out == nullptr) return;
  linear_forward(branch_out_.data(), a.fch_gelu.data(), w + p.fc_proj_w,
                 adds_bias ? w + p.fc_proj_b : nullptr, N, Hl, C, mlp_down);
  all_reduce_on_backend(branch_out_.data(), NC);
  be.residual_forward(out, a.residual2.data(), branch_out_.data(), NC);
}

void GptModel::layernorm_for(const MatmulPrecision& consumer, float* out, float* mean,
                             float* rstd, const float* inp, const float* w, const float* b, int N,
                             int C) {
  if (consumer.format == MatmulFormat::bf16)
    backend_.layernorm_forward_bf16(reinterpret_cast<uint16_t*>(out), mean, rstd, inp, w, b, N, C);
  else
    backend_.layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}

void GptModel::gelu_for(const MatmulPrecision& consumer, float* out, const float* inp, size_t n) {
  if (consumer.format == MatmulFormat::bf16)
    backend_.gelu_forward_bf16(reinterpret_cast<uint16_t*>(out), inp, n);
  else
    backend_.gelu_forward(out, inp, n);
}

void GptModel::linear_forward(float* out, const float* inp, const float* w, const float* bias,
                              int N, int C, int OC, const MatmulPrecision& precision) {
  if (precision.format == MatmulFormat::bf16)
    backend_.bf16_input_matmul_forward(out, reinterpret_cast<const uint16_t*>(inp), w, bias, N,
                                       C, OC);
  else
    backend_.mixed_matmul_forward(out, inp, w, bias, N, C, OC, precision);
}

void GptModel::linear_backward(float* dinp, float* dw, float* dbias, const float* dout,
                               const float* inp, const float* w, int N, int C, int OC,
                               const MatmulPrecision& precision) {
  if (precision.format == MatmulFormat::bf16)
    backend_.bf16_input_matmul_backward(dinp, dw, dbias, dout,
                                        reinterpret_cast<const uint16_t*>(inp), w, N, C, OC);
  else
    backend_.mixed_matmul_backward(dinp, dw, dbias, dout, inp, w, N, C, OC, precision);
}

// On entry dresidual_ holds d(block output); on exit d(block input). The residual
// connections pass the gradient through unchanged, and each LayerNorm backward adds its
// branch's contribution to it. The row-parallel projections' input gradients are this
// rank's; the column-parallel layers leave partial sums of d(ln2) and d(ln1).
void GptModel::block_backward(int64_t layer, BlockActivations& a, const float* x) {
  const BlockParams& p = shard_.block(layer);
  const float* w = params_.data();
  float* g = grads_.data();
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout().shape().dim);
  const int Cl = static_cast<int>(shard_.channels_local());
  const int Hl = static_cast<int>(shard_.hidden_local());
  const int NHl = static_cast<int>(shard_.heads_local());
  const size_t NC = static_cast<size_t>(N) * C;
  auto& be = backend_;
  float* dres = dresidual_.data();
  float* dhidden = dhidden_.data();
  float* datty = dwidth1_.data();  // read by attention_backward only, before d(ln1) is written
  // MLP branch.
  linear_backward(dhidden, g + p.fc_proj_w, g + p.fc_proj_b, dres, a.fch_gelu.data(),
                  w + p.fc_proj_w, N, Hl, C, precision_.block(layer, PrecisionPolicy::kMlpDown));
  be.gelu_backward(dhidden, a.fch.data(), dhidden, static_cast<size_t>(N) * Hl);
  linear_backward(dwidth1_.data(), g + p.fc_w, g + p.fc_b, dhidden, a.ln2.data(), w + p.fc_w, N,
                  C, Hl, precision_.block(layer, PrecisionPolicy::kMlpUp));
  all_reduce_on_backend(dwidth1_.data(), NC);
  be.layernorm_backward(dres, g + p.ln2_w, g + p.ln2_b, dwidth1_.data(), a.residual2.data(),
                        w + p.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
  // Attention branch.
  be.mixed_matmul_backward(datty, g + p.attn_proj_w, g + p.attn_proj_b, dres, a.atty.data(),
                           w + p.attn_proj_w, N, Cl, C,
                           precision_.block(layer, PrecisionPolicy::kAttentionProjection));
  be.attention_backward(dqkv_.data(), datty, a.qkv.data(), a.atty.data(), a.att.data(),
                        static_cast<int>(B_), static_cast<int>(T_), Cl, NHl,
                        precision_.attention());
  linear_backward(dwidth1_.data(), g + p.qkv_w, g + p.qkv_b, dqkv_.data(), a.ln1.data(),
                  w + p.qkv_w, N, C, 3 * Cl, precision_.block(layer, PrecisionPolicy::kQkv));
  all_reduce_on_backend(dwidth1_.data(), NC);
  be.layernorm_backward(dres, g + p.ln1_w, g + p.ln1_b, dwidth1_.data(), x, w + p.ln1_w,
                        a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
}

double GptModel::forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  const GptShape& s = layout().shape();
  if (B < 1 || B > max_batch_ || T < 1 || T > s.context)
    throw std::invalid_argument("GptModel::forward: batch " + std::to_string(B) + " x " +
                                std::to_string(T) + " exceeds the model's " +
                                std::to_string(max_batch_) + " x " + std::to_string(s.context));
  B_ = slot_->B = B;
  T_ = slot_->T = T;
  const size_t BT = static_cast<size_t>(B * T);
  auto check_ids = [&](const int32_t* ids, const char* what) {
    for (size_t i = 0; i < BT; ++i)
      if (ids[i] < 0 || ids[i] >= s.vocab)
        throw std::invalid_argument(std::string("GptModel::forward: ") + what + " id " +
                                    std::to_string(ids[i]) + " at position " +
                                    std::to_string(i) + " is outside the vocabulary [0, " +
                                    std::to_string(s.vocab) + ")");
  };
  // The ids go over first: copy_from_host synchronises a device's stream, which here,
  // before any chunk of an offloaded update is awaited, holds the host up the least.
  if (has_head()) {
    check_ids(targets, "target");
    backend_.copy_from_host(slot_->targets.data(), targets, BT * sizeof(int32_t));
  }
  if (has_embedding()) {
    check_ids(tokens, "token");
    backend_.copy_from_host(slot_->tokens.data(), tokens, BT * sizeof(int32_t));
    const size_t C = static_cast<size_t>(s.dim);
    if (before_params_read_)
      before_params_read_({shard_.wte(), shard_.wpe() + static_cast<size_t>(s.context) * C -
                                             shard_.wte()});
    embedding_forward();
  }
  for (int64_t l = range_.begin; l < range_.end; ++l) {
    const size_t i = static_cast<size_t>(l - range_.begin);
    if (before_params_read_)
      before_params_read_({shard_.block_begin(l), shard_.block_end(l) - shard_.block_begin(l)});
    block_forward(l, activations_of(i), slot_->residual[i].data(), slot_->residual[i + 1].data());
  }
  return has_head() ? head_forward() : 0.0;
}

std::vector<ParamRange> GptModel::ranges_in_backward_order() const {
  const GptShape& s = layout().shape();
  const size_t C = static_cast<size_t>(s.dim);
  std::vector<ParamRange> ranges;
  if (has_head()) ranges.push_back({shard_.lnf_w(), shard_.lnf_b() + C - shard_.lnf_w()});
  for (int64_t l = range_.end - 1; l >= range_.begin; --l)
    ranges.push_back({shard_.block_begin(l), shard_.block_end(l) - shard_.block_begin(l)});
  if (has_embedding())
    ranges.push_back(
        {shard_.wte(), shard_.wpe() + static_cast<size_t>(s.context) * C - shard_.wte()});
  else if (has_head())
    ranges.push_back({shard_.wte(), static_cast<size_t>(shard_.vocab_local()) * C});
  return ranges;
}

void GptModel::backward(float dloss, const GradientsReady& on_ready) {
  if (B_ == 0) throw std::logic_error("GptModel::backward called before forward");
  // Ranges in gradient_ranges_in_backward_order(): as each becomes final, or all at the
  // end for a tensor rank (gpt_model.hpp).
  const std::vector<ParamRange>& ranges = backward_ranges_;
  size_t reported = 0;
  auto ready = [&] {
    if (on_ready && group_ == nullptr) on_ready(ranges[reported++]);
  };
  if (has_head()) {
    head_backward(dloss);
    ready();
  }
  // Without the head, dresidual_ holds the output's gradient (stage_output_grad()).
  for (int64_t l = range_.end - 1; l >= range_.begin; --l) {
    const size_t i = static_cast<size_t>(l - range_.begin);
    BlockActivations& a = activations_of(i);
    const float* x = slot_->residual[i].data();
    if (recompute_.recomputes(static_cast<int64_t>(i))) block_forward(l, a, x, nullptr);
    block_backward(l, a, x);
    ready();
  }
  if (has_embedding()) embedding_backward();
  if (has_embedding() || has_head()) ready();
  if (on_ready && group_ != nullptr)
    for (const ParamRange& range : ranges) on_ready(range);
}

}  // namespace dseek::model
