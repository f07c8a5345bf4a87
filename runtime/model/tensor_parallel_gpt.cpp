// Forward and backward of one tensor-parallel rank; see tensor_parallel_gpt.hpp. The
// block code follows GptModel's line by line, with local widths and the all-reduces
// Megatron-LM places after each row-parallel forward and column-parallel backward.
#include "runtime/model/tensor_parallel_gpt.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "runtime/backend/host_window.hpp"
#include "runtime/model/initial_value.hpp"
#include "runtime/util/fast_math.hpp"

namespace dseek::model {

using backend::DeviceBuffer;
using backend::HostWindow;

namespace {
template <class T>
size_t bytes_of(const DeviceBuffer<T>& buffer) {
  return buffer.size() * sizeof(T);
}
}  // namespace

TensorParallelGpt::TensorParallelGpt(const GptShape& shape, TensorGroup& group,
                                     backend::Backend& backend, int64_t max_batch,
                                     RecomputePolicy recompute)
    : TensorParallelGpt(shape, LayerRange{0, shape.layers}, group, backend, max_batch, 1,
                        recompute) {}

TensorParallelGpt::TensorParallelGpt(const GptShape& shape, LayerRange range, TensorGroup& group,
                                     backend::Backend& backend, int64_t max_batch,
                                     int64_t activation_slots, RecomputePolicy recompute)
    : layout_(shape, group.rank(), group.size()),
      range_(range),
      group_(group),
      backend_(backend),
      max_batch_(max_batch),
      recompute_(recompute) {
  if (max_batch < 1) throw std::invalid_argument("TensorParallelGpt: max_batch must be >= 1");
  if (range.begin < 0 || range.end > shape.layers || range.begin > range.end)
    throw std::invalid_argument("TensorParallelGpt: layer range [" + std::to_string(range.begin) +
                                ", " + std::to_string(range.end) + ") is not inside [0, " +
                                std::to_string(shape.layers) + ")");
  if (activation_slots < 1)
    throw std::invalid_argument("TensorParallelGpt: activation_slots must be >= 1");
  const size_t BT = static_cast<size_t>(max_batch * shape.context);
  const size_t C = static_cast<size_t>(shape.dim);
  const size_t Cl = static_cast<size_t>(layout_.channels_local());
  const size_t Hl = static_cast<size_t>(layout_.hidden_local());
  const size_t att = backend.attention_state_floats(
      static_cast<int>(max_batch), static_cast<int>(shape.context), static_cast<int>(Cl),
      static_cast<int>(layout_.heads_local()));
  params_ = DeviceBuffer<float>(backend, layout_.total());
  grads_ = DeviceBuffer<float>(backend, layout_.total());
  for (int64_t i = 0; i < activation_slots; ++i) slots_.push_back(make_forward_state(BT, att));
  slot_ = &slots_.front();
  if (recompute_.any() && range.end > range.begin) recomputed_ = make_block_activations(BT, att);
  if (has_head()) {
    token_maxima_.resize(BT * static_cast<size_t>(group.size()));
    exp_sum_and_target_.resize(2 * BT);
  }
  dresidual_ = DeviceBuffer<float>(backend, BT * C);
  dwidth1_ = DeviceBuffer<float>(backend, BT * C);
  dqkv_ = DeviceBuffer<float>(backend, BT * 3 * Cl);
  datty_ = DeviceBuffer<float>(backend, BT * Cl);
  dhidden_ = DeviceBuffer<float>(backend, BT * Hl);
  branch_out_ = DeviceBuffer<float>(backend, BT * C);

  for (const ForwardState& state : slots_) {
    activation_memory_.kept += (state.tokens.capacity() + state.targets.capacity()) * sizeof(int32_t);
    for (const auto& buffer : state.residual) activation_memory_.kept += bytes_of(buffer);
    for (const BlockActivations& a : state.blocks) activation_memory_.kept += block_bytes(a);
    for (const auto* buffer : {&state.lnf, &state.lnf_mean, &state.lnf_rstd, &state.logits,
                               &state.losses})
      activation_memory_.kept += bytes_of(*buffer);
  }
  activation_memory_.recompute = block_bytes(recomputed_);
  for (const auto* buffer : {&dresidual_, &dwidth1_, &dqkv_, &datty_, &dhidden_, &branch_out_})
    activation_memory_.backward += bytes_of(*buffer);
  activation_memory_.backward +=
      (token_maxima_.size() + exp_sum_and_target_.size()) * sizeof(float);
}

TensorParallelGpt::ForwardState TensorParallelGpt::make_forward_state(size_t BT, size_t att) {
  const size_t C = static_cast<size_t>(layout_.whole().shape().dim);
  auto& backend = backend_;
  ForwardState state;
  state.tokens.reserve(BT);
  state.targets.reserve(BT);
  for (int64_t l = range_.begin; l <= range_.end; ++l) state.residual.emplace_back(backend, BT * C);
  for (int64_t l = range_.begin; l < range_.end; ++l)
    state.blocks.push_back(recompute_.recomputes(l - range_.begin) ? BlockActivations{}
                                                                  : make_block_activations(BT, att));
  if (has_head()) {
    state.lnf = DeviceBuffer<float>(backend, BT * C);
    state.lnf_mean = DeviceBuffer<float>(backend, BT);
    state.lnf_rstd = DeviceBuffer<float>(backend, BT);
    state.logits = DeviceBuffer<float>(backend, BT * static_cast<size_t>(layout_.vocab_local()));
    state.losses = DeviceBuffer<float>(backend, BT);
  }
  return state;
}

TensorParallelGpt::BlockActivations TensorParallelGpt::make_block_activations(size_t BT,
                                                                              size_t att) {
  const size_t C = static_cast<size_t>(layout_.whole().shape().dim);
  const size_t Cl = static_cast<size_t>(layout_.channels_local());
  const size_t Hl = static_cast<size_t>(layout_.hidden_local());
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

size_t TensorParallelGpt::block_bytes(const BlockActivations& a) {
  size_t bytes = 0;
  for (const auto* buffer : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.qkv, &a.atty, &a.att,
                             &a.residual2, &a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu})
    bytes += bytes_of(*buffer);
  return bytes;
}

TensorParallelGpt::BlockActivations& TensorParallelGpt::activations_of(size_t i) {
  return recompute_.recomputes(static_cast<int64_t>(i)) ? *recompute_set_ : slot_->blocks[i];
}

void TensorParallelGpt::select_activation_slot(int64_t slot) {
  if (slot < 0 || slot >= activation_slots())
    throw std::out_of_range("TensorParallelGpt: activation slot " + std::to_string(slot) + " of " +
                            std::to_string(activation_slots()));
  slot_ = &slots_[static_cast<size_t>(slot)];
  B_ = slot_->B;
  T_ = slot_->T;
}

void TensorParallelGpt::share_recompute_scratch(TensorParallelGpt& owner) {
  if (&owner == this || !recompute_.any() || range_.end == range_.begin) return;
  const GptShape& a = layout_.whole().shape();
  const GptShape& b = owner.layout_.whole().shape();
  const bool same_shape = a.dim == b.dim && a.heads == b.heads && a.context == b.context &&
                          max_batch_ == owner.max_batch_ && layout_.ranks() == owner.layout_.ranks();
  if (!same_shape || owner.recompute_set_ != &owner.recomputed_ ||
      block_bytes(owner.recomputed_) == 0)
    throw std::invalid_argument(
        "TensorParallelGpt::share_recompute_scratch: the owner must recompute (model.recompute) "
        "with its own scratch set, the same shape, group size and micro-batch size");
  recompute_set_ = &owner.recomputed_;
  recomputed_ = BlockActivations{};
  activation_memory_.recompute = 0;
}

void TensorParallelGpt::init_weights(uint64_t seed, double std) {
  const ParamLayout& whole = layout_.whole();
  const auto& tensors = whole.tensors();
  std::vector<float> host(layout_.total(), 0.0f);
  for (const ShardSegment& s : layout_.segments()) {
    // The whole-model tensor holding the segment (a segment never crosses tensors).
    auto it = std::upper_bound(tensors.begin(), tensors.end(), s.whole_offset,
                               [](size_t offset, const ParamTensor& t) { return offset < t.offset; });
    const ParamTensor& tensor = *std::prev(it);
    for (size_t i = 0; i < s.count; ++i)
      host[s.shard_offset + i] =
          initial_value(tensor, s.whole_offset + i, seed, std, whole.shape().layers);
  }
  backend_.copy_from_host(params_.data(), host.data(), host.size() * sizeof(float));
}

void TensorParallelGpt::zero_grads() { backend_.zero(grads_.data(), grads_.size()); }

void TensorParallelGpt::block_forward(int64_t layer, BlockActivations& a, const float* x,
                                      float* out) {
  const BlockParams& p = layout_.block(layer);
  const float* w = params_.data();
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout_.whole().shape().dim);
  const int Cl = static_cast<int>(layout_.channels_local());
  const int Hl = static_cast<int>(layout_.hidden_local());
  const int NHl = static_cast<int>(layout_.heads_local());
  const size_t NC = static_cast<size_t>(N) * C;
  const bool adds_bias = group_.rank() == 0;
  auto& be = backend_;
  be.layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, w + p.ln1_w,
                       w + p.ln1_b, N, C);
  be.mixed_matmul_forward(a.qkv.data(), a.ln1.data(), w + p.qkv_w, w + p.qkv_b, N, C, 3 * Cl,
                          precision_.block(layer, PrecisionPolicy::kQkv));
  be.attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), static_cast<int>(B_),
                       static_cast<int>(T_), Cl, NHl);
  be.mixed_matmul_forward(branch_out_.data(), a.atty.data(), w + p.attn_proj_w,
                          adds_bias ? w + p.attn_proj_b : nullptr, N, Cl, C,
                          precision_.block(layer, PrecisionPolicy::kAttentionProjection));
  all_reduce_on_backend(branch_out_.data(), NC);
  be.residual_forward(a.residual2.data(), x, branch_out_.data(), NC);
  be.layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.residual2.data(),
                       w + p.ln2_w, w + p.ln2_b, N, C);
  be.mixed_matmul_forward(a.fch.data(), a.ln2.data(), w + p.fc_w, w + p.fc_b, N, C, Hl,
                          precision_.block(layer, PrecisionPolicy::kMlpUp));
  be.gelu_forward(a.fch_gelu.data(), a.fch.data(), static_cast<size_t>(N) * Hl);
  if (out == nullptr) return;
  be.mixed_matmul_forward(branch_out_.data(), a.fch_gelu.data(), w + p.fc_proj_w,
                          adds_bias ? w + p.fc_proj_b : nullptr, N, Hl, C,
                          precision_.block(layer, PrecisionPolicy::kMlpDown));
  all_reduce_on_backend(branch_out_.data(), NC);
  be.residual_forward(out, a.residual2.data(), branch_out_.data(), NC);
}

void TensorParallelGpt::block_backward(int64_t layer, BlockActivations& a, const float* x) {
  const BlockParams& p = layout_.block(layer);
  const float* w = params_.data();
  float* g = grads_.data();
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout_.whole().shape().dim);
  const int Cl = static_cast<int>(layout_.channels_local());
  const int Hl = static_cast<int>(layout_.hidden_local());
  const int NHl = static_cast<int>(layout_.heads_local());
  const size_t NC = static_cast<size_t>(N) * C;
  auto& be = backend_;
  float* dres = dresidual_.data();
  float* dhidden = dhidden_.data();
  // MLP branch: the row-parallel projection's input gradient is local; the
  // column-parallel c_fc leaves a partial sum of d(ln2).
  be.mixed_matmul_backward(dhidden, g + p.fc_proj_w, g + p.fc_proj_b, dres, a.fch_gelu.data(),
                           w + p.fc_proj_w, N, Hl, C,
                           precision_.block(layer, PrecisionPolicy::kMlpDown));
  be.gelu_backward(dhidden, a.fch.data(), dhidden, static_cast<size_t>(N) * Hl);
  be.mixed_matmul_backward(dwidth1_.data(), g + p.fc_w, g + p.fc_b, dhidden, a.ln2.data(),
                           w + p.fc_w, N, C, Hl,
                           precision_.block(layer, PrecisionPolicy::kMlpUp));
  all_reduce_on_backend(dwidth1_.data(), NC);
  be.layernorm_backward(dres, g + p.ln2_w, g + p.ln2_b, dwidth1_.data(), a.residual2.data(),
                        w + p.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
  // Attention branch, the same pattern.
  be.mixed_matmul_backward(datty_.data(), g + p.attn_proj_w, g + p.attn_proj_b, dres,
                           a.atty.data(), w + p.attn_proj_w, N, Cl, C,
                           precision_.block(layer, PrecisionPolicy::kAttentionProjection));
  be.attention_backward(dqkv_.data(), datty_.data(), a.qkv.data(), a.att.data(),
                        static_cast<int>(B_), static_cast<int>(T_), Cl, NHl);
  be.mixed_matmul_backward(dwidth1_.data(), g + p.qkv_w, g + p.qkv_b, dqkv_.data(), a.ln1.data(),
                           w + p.qkv_w, N, C, 3 * Cl,
                           precision_.block(layer, PrecisionPolicy::kQkv));
  all_reduce_on_backend(dwidth1_.data(), NC);
  be.layernorm_backward(dres, g + p.ln1_w, g + p.ln1_b, dwidth1_.data(), x, w + p.ln1_w,
                        a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
}

void TensorParallelGpt::all_reduce_on_backend(float* data, size_t count) {
  HostWindow window(backend_, data, count, HostWindow::Access::update, host_scratch_[0]);
  group_.all_reduce_sum(window.data(), count);
  window.write_back();
}

// Each rank writes the rows of the tokens in its vocabulary slice (zeros elsewhere); the
// all-reduce assembles the lookup, then every rank adds the replicated wpe.
void TensorParallelGpt::embedding_forward() {
  const int64_t C = layout_.whole().shape().dim;
  const int64_t v0 = layout_.vocab_begin(), vl = layout_.vocab_local();
  const int64_t N = B_ * T_;
  using Access = HostWindow::Access;
  HostWindow wte_window(backend_, params_.data() + layout_.wte(), static_cast<size_t>(vl * C),
                        Access::read, host_scratch_[0]);
  HostWindow wpe_window(backend_, params_.data() + layout_.wpe(), static_cast<size_t>(T_ * C),
                        Access::read, host_scratch_[1]);
  HostWindow out_window(backend_, slot_->residual.front().data(), static_cast<size_t>(N * C),
                        Access::overwrite, host_scratch_[2]);
  const float* wte = wte_window.data();
  const float* wpe = wpe_window.data();
  float* out = out_window.data();
  std::fill(out, out + N * C, 0.0f);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t local = slot_->tokens[static_cast<size_t>(n)] - v0;
    if (local < 0 || local >= vl) continue;
    std::copy(wte + local * C, wte + (local + 1) * C, out + n * C);
  }
  group_.all_reduce_sum(out, static_cast<size_t>(N * C));
  for (int64_t n = 0; n < N; ++n) {
    const float* pos = wpe + (n % T_) * C;
    for (int64_t c = 0; c < C; ++c) out[n * C + c] += pos[c];
  }
  out_window.write_back();
}

void TensorParallelGpt::embedding_backward() {
  const int64_t C = layout_.whole().shape().dim;
  const int64_t v0 = layout_.vocab_begin(), vl = layout_.vocab_local();
  const int64_t N = B_ * T_;
  using Access = HostWindow::Access;
  HostWindow dwte_window(backend_, grads_.data() + layout_.wte(), static_cast<size_t>(vl * C),
                         Access::update, host_scratch_[0]);
  HostWindow dwpe_window(backend_, grads_.data() + layout_.wpe(), static_cast<size_t>(T_ * C),
                         Access::update, host_scratch_[1]);
  HostWindow dout_window(backend_, dresidual_.data(), static_cast<size_t>(N * C), Access::read,
                         host_scratch_[2]);
  float* dwte = dwte_window.data();
  float* dwpe = dwpe_window.data();
  const float* dout = dout_window.data();
  for (int64_t n = 0; n < N; ++n) {
    const float* row = dout + n * C;
    float* pos = dwpe + (n % T_) * C;
    for (int64_t c = 0; c < C; ++c) pos[c] += row[c];
    const int64_t local = slot_->tokens[static_cast<size_t>(n)] - v0;
    if (local < 0 || local >= vl) continue;
    float* emb = dwte + local * C;
    for (int64_t c = 0; c < C; ++c) emb[c] += row[c];
  }
  dwte_window.write_back();
  dwpe_window.write_back();
}

// Vocabulary-parallel softmax cross-entropy (Megatron-LM): the logits of a token are
// spread over the ranks, so its maximum, its sum of exponentials and its target logit are
// each a reduction over the group. The maxima travel as one slot per rank in a sum
// all-reduce (an exact maximum without a max collective); the sums and target logits
// (zero on the ranks that do not hold the target) in a second one. The logits become
// this rank's slice of the probabilities, as softmax_cross_entropy_forward leaves them.
double TensorParallelGpt::cross_entropy_forward() {
  const int64_t N = B_ * T_;
  const int64_t vl = layout_.vocab_local(), v0 = layout_.vocab_begin();
  const int ranks = group_.size();
  using Access = HostWindow::Access;
  HostWindow logits_window(backend_, slot_->logits.data(), static_cast<size_t>(N * vl),
                           Access::update, host_scratch_[0]);
  HostWindow losses_window(backend_, slot_->losses.data(), static_cast<size_t>(N),
                           Access::overwrite, host_scratch_[1]);
  float* logits = logits_window.data();
  std::fill(token_maxima_.begin(), token_maxima_.begin() + N * ranks, 0.0f);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * vl;
    token_maxima_[static_cast<size_t>(n * ranks + group_.rank())] = *std::max_element(row, row + vl);
  }
  group_.all_reduce_sum(token_maxima_.data(), static_cast<size_t>(N * ranks));
  float* sums = exp_sum_and_target_.data();
  float* target_logits = sums + N;
  for (int64_t n = 0; n < N; ++n) {
    const float* slots = token_maxima_.data() + n * ranks;
    const float max_value = *std::max_element(slots, slots + ranks);
    float* row = logits + n * vl;
    const int64_t target = slot_->targets[static_cast<size_t>(n)] - v0;
    target_logits[n] = target >= 0 && target < vl ? row[target] - max_value : 0.0f;
    float total = 0.0f;
    for (int64_t j = 0; j < vl; ++j) {
      row[j] = util::exp_approx(row[j] - max_value);
      total += row[j];
    }
    sums[n] = total;
  }
  group_.all_reduce_sum(exp_sum_and_target_.data(), static_cast<size_t>(2 * N));
  float* losses = losses_window.data();
  for (int64_t n = 0; n < N; ++n) {
    const float inverse = 1.0f / sums[n];
    float* row = logits + n * vl;
    for (int64_t j = 0; j < vl; ++j) row[j] *= inverse;
    losses[n] = std::log(sums[n]) - target_logits[n];
  }
  logits_window.write_back();
  losses_window.write_back();
  // The backend's sum, in its order: the single-node loss's bits on every backend.
  return backend_.sum(slot_->losses.data(), static_cast<size_t>(N)) / static_cast<double>(N);
}

void TensorParallelGpt::cross_entropy_backward(float dloss) {
  const int64_t N = B_ * T_;
  const int64_t vl = layout_.vocab_local(), v0 = layout_.vocab_begin();
  HostWindow probs_window(backend_, slot_->logits.data(), static_cast<size_t>(N * vl),
                          HostWindow::Access::update, host_scratch_[0]);
  float* probs = probs_window.data();
  for (int64_t n = 0; n < N; ++n) {
    float* row = probs + n * vl;
    for (int64_t j = 0; j < vl; ++j) row[j] *= dloss;
    const int64_t target = slot_->targets[static_cast<size_t>(n)] - v0;
    if (target >= 0 && target < vl) row[target] -= dloss;
  }
  probs_window.write_back();
}

double TensorParallelGpt::forward(const int32_t* tokens, const int32_t* targets, int64_t B,
                                  int64_t T) {
  const GptShape& s = layout_.whole().shape();
  if (B < 1 || B > max_batch_ || T < 1 || T > s.context)
    throw std::invalid_argument("TensorParallelGpt::forward: batch " + std::to_string(B) + " x " +
                                std::to_string(T) + " exceeds the model's " +
                                std::to_string(max_batch_) + " x " + std::to_string(s.context));
  B_ = slot_->B = B;
  T_ = slot_->T = T;
  const size_t BT = static_cast<size_t>(B * T);
  auto check_ids = [&](const int32_t* ids, const char* what) {
    for (size_t i = 0; i < BT; ++i)
      if (ids[i] < 0 || ids[i] >= s.vocab)
        throw std::invalid_argument(std::string("TensorParallelGpt::forward: ") + what +
                                    " id at position " + std::to_string(i) +
                                    " is outside the vocabulary [0, " + std::to_string(s.vocab) +
                                    ")");
  };
  if (has_embedding()) {
    check_ids(tokens, "token");
    slot_->tokens.assign(tokens, tokens + BT);
    embedding_forward();
  }
  for (int64_t l = range_.begin; l < range_.end; ++l) {
    const size_t i = static_cast<size_t>(l - range_.begin);
    block_forward(l, activations_of(i), slot_->residual[i].data(), slot_->residual[i + 1].data());
  }
  if (!has_head()) return 0.0;
  check_ids(targets, "target");
  slot_->targets.assign(targets, targets + BT);
  const int N = static_cast<int>(BT);
  const int C = static_cast<int>(s.dim);
  const float* w = params_.data();
  backend_.layernorm_forward(slot_->lnf.data(), slot_->lnf_mean.data(), slot_->lnf_rstd.data(),
                             slot_->residual.back().data(), w + layout_.lnf_w(),
                             w + layout_.lnf_b(), N, C);
  backend_.matmul_forward(slot_->logits.data(), slot_->lnf.data(), w + layout_.wte(), nullptr, N,
                          C, static_cast<int>(layout_.vocab_local()));
  return cross_entropy_forward();
}

void TensorParallelGpt::backward(float dloss) {
  if (B_ == 0) throw std::logic_error("TensorParallelGpt::backward called before forward");
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout_.whole().shape().dim);
  const float* w = params_.data();
  float* g = grads_.data();
  if (has_head()) {
    cross_entropy_backward(dloss);
    // The head is column-parallel over the vocabulary: d(lnf) is a partial sum.
    backend_.matmul_backward(dwidth1_.data(), g + layout_.wte(), nullptr, slot_->logits.data(),
                             slot_->lnf.data(), w + layout_.wte(), N, C,
                             static_cast<int>(layout_.vocab_local()));
    all_reduce_on_backend(dwidth1_.data(), static_cast<size_t>(N) * C);
    backend_.zero(dresidual_.data(), static_cast<size_t>(N) * C);
    backend_.layernorm_backward(dresidual_.data(), g + layout_.lnf_w(), g + layout_.lnf_b(),
                                dwidth1_.data(), slot_->residual.back().data(),
                                w + layout_.lnf_w(), slot_->lnf_mean.data(),
                                slot_->lnf_rstd.data(), N, C);
  }
  // Without the head, dresidual_ holds the output's gradient (stage_output_grad()).
  for (int64_t l = range_.end - 1; l >= range_.begin; --l) {
    const size_t i = static_cast<size_t>(l - range_.begin);
    BlockActivations& a = activations_of(i);
    const float* x = slot_->residual[i].data();
    if (recompute_.recomputes(static_cast<int64_t>(i))) block_forward(l, a, x, nullptr);
    block_backward(l, a, x);
  }
  if (has_embedding()) embedding_backward();
}

}  // namespace dseek::model
