// Forward and backward of the GPT model over a range of blocks; see gpt_model.hpp.
// Each block's backward mirrors its forward line by line, in reverse.
#include "runtime/model/gpt_model.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "runtime/model/initial_value.hpp"

namespace dseek::model {

using backend::DeviceBuffer;

namespace {
template <class T>
size_t bytes_of(const DeviceBuffer<T>& buffer) {
  return buffer.size() * sizeof(T);
}
}  // namespace

GptModel::GptModel(const GptShape& shape, LayerRange range, backend::Backend& backend,
                   int64_t max_micro_batch, int64_t activation_slots,
                   RecomputePolicy recompute)
    : layout_(shape), range_(range), backend_(backend), max_batch_(max_micro_batch),
      recompute_(recompute) {
  if (range.begin < 0 || range.end > shape.layers || range.begin > range.end)
    throw std::invalid_argument("GptModel: layer range [" + std::to_string(range.begin) + ", " +
                                std::to_string(range.end) + ") is not inside [0, " +
                                std::to_string(shape.layers) + ")");
  if (shape.dim % shape.heads != 0)
    throw std::invalid_argument("GptModel: dim must be divisible by heads");
  if (activation_slots < 1) throw std::invalid_argument("GptModel: activation_slots must be >= 1");
  const size_t BT = static_cast<size_t>(max_micro_batch * shape.context);
  const size_t C = static_cast<size_t>(shape.dim);
  const size_t att = backend.attention_state_floats(
      static_cast<int>(max_micro_batch), static_cast<int>(shape.context),
      static_cast<int>(shape.dim), static_cast<int>(shape.heads));
  params_ = DeviceBuffer<float>(backend, layout_.total());
  grads_ = DeviceBuffer<float>(backend, layout_.total());
  for (int64_t i = 0; i < activation_slots; ++i) slots_.push_back(make_forward_state(BT, att));
  slot_ = &slots_.front();
  const bool recomputes_a_block = recompute_.any() && range.end > range.begin;
  if (recomputes_a_block) recomputed_ = make_block_activations(BT, att);
  dresidual_ = DeviceBuffer<float>(backend, BT * C);
  dwidth1_ = DeviceBuffer<float>(backend, BT * C);
  dwidth3_ = DeviceBuffer<float>(backend, BT * 3 * C);
  dwidth4_ = DeviceBuffer<float>(backend, BT * 4 * C);
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
  for (const auto* buffer : {&dresidual_, &dwidth1_, &dwidth3_, &dwidth4_, &branch_out_})
    activation_memory_.backward += bytes_of(*buffer);
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

void GptModel::share_recompute_scratch(GptModel& owner) {
  if (&owner == this || !recompute_.any() || range_.end == range_.begin) return;
  const GptShape& a = layout_.shape();
  const GptShape& b = owner.layout_.shape();
  const bool same_shape = a.dim == b.dim && a.heads == b.heads && a.context == b.context &&
                          max_batch_ == owner.max_batch_;
  if (!same_shape || owner.recompute_set_ != &owner.recomputed_ ||
      block_bytes(owner.recomputed_) == 0)
    throw std::invalid_argument(
        "GptModel::share_recompute_scratch: the owner must recompute (model.recompute) with "
        "its own scratch set, the same shape and the same micro-batch size");
  recompute_set_ = &owner.recomputed_;
  recomputed_ = BlockActivations{};
  activation_memory_.recompute = 0;
}

GptModel::ForwardState GptModel::make_forward_state(size_t BT, size_t att) {
  const GptShape& shape = layout_.shape();
  const size_t C = static_cast<size_t>(shape.dim);
  auto& backend = backend_;
  ForwardState state;
  state.tokens = DeviceBuffer<int32_t>(backend, BT);
  state.targets = DeviceBuffer<int32_t>(backend, BT);
  for (int64_t l = range_.begin; l <= range_.end; ++l) state.residual.emplace_back(backend, BT * C);
  for (int64_t l = range_.begin; l < range_.end; ++l) {
    if (recompute_.recomputes(l - range_.begin)) {
      state.blocks.emplace_back();  // its forward runs in the shared recompute set
      continue;
    }
    state.blocks.push_back(make_block_activations(BT, att));
  }
  if (has_head()) {
    state.lnf = DeviceBuffer<float>(backend, BT * C);
    state.lnf_mean = DeviceBuffer<float>(backend, BT);
    state.lnf_rstd = DeviceBuffer<float>(backend, BT);
    state.logits = DeviceBuffer<float>(backend, BT * static_cast<size_t>(shape.vocab));
    state.losses = DeviceBuffer<float>(backend, BT);
  }
  return state;
}

GptModel::BlockActivations GptModel::make_block_activations(size_t BT, size_t att) {
  const size_t C = static_cast<size_t>(layout_.shape().dim);
  auto& backend = backend_;
  BlockActivations a;
  a.ln1 = DeviceBuffer<float>(backend, BT * C);
  a.ln1_mean = DeviceBuffer<float>(backend, BT);
  a.ln1_rstd = DeviceBuffer<float>(backend, BT);
  a.qkv = DeviceBuffer<float>(backend, BT * 3 * C);
  a.atty = DeviceBuffer<float>(backend, BT * C);
  a.att = DeviceBuffer<float>(backend, att);
  a.residual2 = DeviceBuffer<float>(backend, BT * C);
  a.ln2 = DeviceBuffer<float>(backend, BT * C);
  a.ln2_mean = DeviceBuffer<float>(backend, BT);
  a.ln2_rstd = DeviceBuffer<float>(backend, BT);
  a.fch = DeviceBuffer<float>(backend, BT * 4 * C);
  a.fch_gelu = DeviceBuffer<float>(backend, BT * 4 * C);
  return a;
}

void GptModel::select_activation_slot(int64_t slot) {
  if (slot < 0 || slot >= activation_slots())
    throw std::out_of_range("GptModel: activation slot " + std::to_string(slot) + " of " +
                            std::to_string(activation_slots()));
  slot_ = &slots_[static_cast<size_t>(slot)];
  B_ = slot_->B;
  T_ = slot_->T;
}

void GptModel::init_weights(uint64_t seed, double std) {
  std::vector<float> host(layout_.total(), 0.0f);
  for (const ParamTensor& tensor : layout_.tensors())
    for (size_t i = 0; i < tensor.size(); ++i)
      host[tensor.offset + i] =
          initial_value(tensor, tensor.offset + i, seed, std, layout_.shape().layers);
  backend_.copy_from_host(params_.data(), host.data(), host.size() * sizeof(float));
}

void GptModel::zero_grads() { backend_.zero(grads_.data(), grads_.size()); }

void GptModel::block_forward(int64_t layer, BlockActivations& a, const float* x, float* out) {
  const BlockParams& p = layout_.block(layer);
  const float* w = params_.data();
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout_.shape().dim);
  const int NH = static_cast<int>(layout_.shape().heads);
  const size_t NC = static_cast<size_t>(N) * C;
  auto& be = backend_;
  be.layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, w + p.ln1_w,
                       w + p.ln1_b, N, C);
  be.mixed_matmul_forward(a.qkv.data(), a.ln1.data(), w + p.qkv_w, w + p.qkv_b, N, C, 3 * C,
                          precision_.block(layer, PrecisionPolicy::kQkv));
  be.attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), static_cast<int>(B_),
                       static_cast<int>(T_), C, NH);
  be.mixed_matmul_forward(branch_out_.data(), a.atty.data(), w + p.attn_proj_w,
                          w + p.attn_proj_b, N, C, C,
                          precision_.block(layer, PrecisionPolicy::kAttentionProjection));
  be.residual_forward(a.residual2.data(), x, branch_out_.data(), NC);
  be.layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.residual2.data(),
                       w + p.ln2_w, w + p.ln2_b, N, C);
  be.mixed_matmul_forward(a.fch.data(), a.ln2.data(), w + p.fc_w, w + p.fc_b, N, C, 4 * C,
                          precision_.block(layer, PrecisionPolicy::kMlpUp));
  be.gelu_forward(a.fch_gelu.data(), a.fch.data(), NC * 4);
  if (out == nullptr) return;
  be.mixed_matmul_forward(branch_out_.data(), a.fch_gelu.data(), w + p.fc_proj_w,
                          w + p.fc_proj_b, N, 4 * C, C,
                          precision_.block(layer, PrecisionPolicy::kMlpDown));
  be.residual_forward(out, a.residual2.data(), branch_out_.data(), NC);
}

// On entry dresidual_ holds d(block output); on exit d(block input). The residual
// connections pass the gradient through unchanged, and each LayerNorm backward adds its
// branch's contribution to it.
void GptModel::block_backward(int64_t layer, BlockActivations& a, const float* x) {
  const BlockParams& p = layout_.block(layer);
  const float* w = params_.data();
  float* g = grads_.data();
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout_.shape().dim);
  const int NH = static_cast<int>(layout_.shape().heads);
  const size_t NC = static_cast<size_t>(N) * C;
  auto& be = backend_;
  float* dres = dresidual_.data();
  float* dgelu = dwidth4_.data();
  // MLP branch.
  be.mixed_matmul_backward(dgelu, g + p.fc_proj_w, g + p.fc_proj_b, dres, a.fch_gelu.data(),
                           w + p.fc_proj_w, N, 4 * C, C,
                           precision_.block(layer, PrecisionPolicy::kMlpDown));
  be.gelu_backward(dgelu, a.fch.data(), dgelu, NC * 4);
  be.mixed_matmul_backward(dwidth1_.data(), g + p.fc_w, g + p.fc_b, dgelu, a.ln2.data(),
                           w + p.fc_w, N, C, 4 * C,
                           precision_.block(layer, PrecisionPolicy::kMlpUp));
  be.layernorm_backward(dres, g + p.ln2_w, g + p.ln2_b, dwidth1_.data(), a.residual2.data(),
                        w + p.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
  // Attention branch.
  be.mixed_matmul_backward(dwidth1_.data(), g + p.attn_proj_w, g + p.attn_proj_b, dres,
                           a.atty.data(), w + p.attn_proj_w, N, C, C,
                           precision_.block(layer, PrecisionPolicy::kAttentionProjection));
  be.attention_backward(dwidth3_.data(), dwidth1_.data(), a.qkv.data(), a.atty.data(),
                        a.att.data(), static_cast<int>(B_), static_cast<int>(T_), C, NH);
  be.mixed_matmul_backward(dwidth1_.data(), g + p.qkv_w, g + p.qkv_b, dwidth3_.data(),
                           a.ln1.data(), w + p.qkv_w, N, C, 3 * C,
                           precision_.block(layer, PrecisionPolicy::kQkv));
  be.layernorm_backward(dres, g + p.ln1_w, g + p.ln1_b, dwidth1_.data(), x, w + p.ln1_w,
                        a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
}

double GptModel::forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  const GptShape& s = layout_.shape();
  if (B < 1 || B > max_batch_ || T < 1 || T > s.context)
    throw std::invalid_argument("GptModel::forward: batch " + std::to_string(B) + " x " +
                                std::to_string(T) + " exceeds the model's " +
                                std::to_string(max_batch_) + " x " + std::to_string(s.context));
  B_ = slot_->B = B;
  T_ = slot_->T = T;
  const size_t BT = static_cast<size_t>(B * T);
  const int C = static_cast<int>(s.dim);
  const float* w = params_.data();
  auto check_ids = [&](const int32_t* ids, const char* what) {
    for (size_t i = 0; i < BT; ++i)
      if (ids[i] < 0 || ids[i] >= s.vocab)
        throw std::invalid_argument(std::string("GptModel::forward: ") + what + " id " +
                                    std::to_string(ids[i]) + " at position " +
                                    std::to_string(i) + " is outside the vocabulary [0, " +
                                    std::to_string(s.vocab) + ")");
  };
  auto need = [&](size_t offset, size_t end) {
    if (before_params_read_) before_params_read_(ParamRange{offset, end - offset});
  };
  const size_t Cs = static_cast<size_t>(C);
  // The tokens and targets go over first: copy_from_host synchronises a device's stream,
  // which here, before any chunk of an offloaded update is awaited, holds the host up
  // the least (after, it would wait for the earlier layers' kernels).
  if (has_head()) {
    check_ids(targets, "target");
    backend_.copy_from_host(slot_->targets.data(), targets, BT * sizeof(int32_t));
  }
  if (has_embedding()) {
    check_ids(tokens, "token");
    backend_.copy_from_host(slot_->tokens.data(), tokens, BT * sizeof(int32_t));
    need(layout_.wte(), layout_.wpe() + static_cast<size_t>(s.context) * Cs);
    backend_.encoder_forward(slot_->residual[0].data(), slot_->tokens.data(), w + layout_.wte(),
                             w + layout_.wpe(), static_cast<int>(B), static_cast<int>(T), C);
  }
  for (int64_t l = range_.begin; l < range_.end; ++l) {
    const size_t i = static_cast<size_t>(l - range_.begin);
    need(layout_.block_begin(l), layout_.block_end(l));
    block_forward(l, activations_of(i), slot_->residual[i].data(), slot_->residual[i + 1].data());
  }
  if (!has_head()) return 0.0;
  const int N = static_cast<int>(BT);
  const int V = static_cast<int>(s.vocab);
  need(layout_.lnf_w(), layout_.lnf_b() + Cs);
  need(layout_.wte(), layout_.wte() + static_cast<size_t>(V) * Cs);
  backend_.layernorm_forward(slot_->lnf.data(), slot_->lnf_mean.data(), slot_->lnf_rstd.data(),
                             slot_->residual.back().data(), w + layout_.lnf_w(), w + layout_.lnf_b(),
                             N, C);
  backend_.mixed_matmul_forward(slot_->logits.data(), slot_->lnf.data(), w + layout_.wte(),
                                nullptr, N, C, V, precision_.head());
  backend_.softmax_cross_entropy_forward(slot_->logits.data(), slot_->losses.data(), slot_->targets.data(), N, V);
  return backend_.sum(slot_->losses.data(), BT) / static_cast<double>(BT);
}

std::vector<ParamRange> GptModel::gradient_ranges_in_backward_order() const {
  const GptShape& s = layout_.shape();
  const size_t C = static_cast<size_t>(s.dim);
  std::vector<ParamRange> ranges;
  if (has_head()) ranges.push_back({layout_.lnf_w(), layout_.lnf_b() + C - layout_.lnf_w()});
  for (int64_t l = range_.end - 1; l >= range_.begin; --l)
    ranges.push_back({layout_.block_begin(l), layout_.block_end(l) - layout_.block_begin(l)});
  if (has_embedding()) {
    const size_t end = layout_.wpe() + static_cast<size_t>(s.context) * C;
    ranges.push_back({layout_.wte(), end - layout_.wte()});
  } else if (has_head()) {
    ranges.push_back({layout_.wte(), static_cast<size_t>(s.vocab) * C});
  }
  return ranges;
}

void GptModel::backward(float dloss, const GradientsReady& on_ready) {
  if (B_ == 0) throw std::logic_error("GptModel::backward called before forward");
  const GptShape& s = layout_.shape();
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(s.dim);
  const size_t Cs = static_cast<size_t>(C);
  const float* w = params_.data();
  float* g = grads_.data();
  auto ready = [&](size_t offset, size_t end) {
    if (on_ready) on_ready(ParamRange{offset, end - offset});
  };
  if (has_head()) {
    const int V = static_cast<int>(s.vocab);
    backend_.softmax_cross_entropy_backward(slot_->logits.data(), slot_->targets.data(), N, V, dloss);
    backend_.zero(dresidual_.data(), static_cast<size_t>(N) * C);
    backend_.mixed_matmul_backward(dwidth1_.data(), g + layout_.wte(), nullptr,
                                   slot_->logits.data(), slot_->lnf.data(), w + layout_.wte(),
                                   N, C, V, precision_.head());
    backend_.layernorm_backward(dresidual_.data(), g + layout_.lnf_w(), g + layout_.lnf_b(),
                                dwidth1_.data(), slot_->residual.back().data(), w + layout_.lnf_w(),
                                slot_->lnf_mean.data(), slot_->lnf_rstd.data(), N, C);
    ready(layout_.lnf_w(), layout_.lnf_b() + Cs);
  }
  for (int64_t l = range_.end - 1; l >= range_.begin; --l) {
    const size_t i = static_cast<size_t>(l - range_.begin);
    BlockActivations& a = activations_of(i);
    const float* x = slot_->residual[i].data();
    if (recompute_.recomputes(static_cast<int64_t>(i))) block_forward(l, a, x, nullptr);
    block_backward(l, a, x);
    ready(layout_.block_begin(l), layout_.block_end(l));
  }
  if (has_embedding()) {
    backend_.encoder_backward(g + layout_.wte(), g + layout_.wpe(), dresidual_.data(),
                              slot_->tokens.data(), static_cast<int>(B_), static_cast<int>(T_), C);
    ready(layout_.wte(), layout_.wpe() + static_cast<size_t>(s.context) * Cs);
  } else if (has_head()) {
    ready(layout_.wte(), layout_.wte() + static_cast<size_t>(s.vocab) * Cs);
  }
}

}  // namespace dseek::model
