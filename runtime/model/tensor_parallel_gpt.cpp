// Forward and backward of one tensor-parallel rank; see tensor_parallel_gpt.hpp. The
// block code follows GptModel's line by line, with local widths and the all-reduces
// Megatron-LM places after each row-parallel forward and column-parallel backward.
#include "runtime/model/tensor_parallel_gpt.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/backend/host_window.hpp"
#include "runtime/model/initial_value.hpp"

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
    max_slots_ = DeviceBuffer<float>(backend, BT * static_cast<size_t>(group.size()));
    sums_and_targets_ = DeviceBuffer<float>(backend, 2 * BT);
  }
  dresidual_ = DeviceBuffer<float>(backend, BT * C);
  dwidth1_ = DeviceBuffer<float>(backend, BT * C);
  dqkv_ = DeviceBuffer<float>(backend, BT * 3 * Cl);
  datty_ = DeviceBuffer<float>(backend, BT * Cl);
  dhidden_ = DeviceBuffer<float>(backend, BT * Hl);
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
  for (const auto* buffer : {&dresidual_, &dwidth1_, &dqkv_, &datty_, &dhidden_, &branch_out_})
    activation_memory_.backward += bytes_of(*buffer);
  activation_memory_.backward += bytes_of(max_slots_) + bytes_of(sums_and_targets_);
}

TensorParallelGpt::ForwardState TensorParallelGpt::make_forward_state(size_t BT, size_t att) {
  const size_t C = static_cast<size_t>(layout_.whole().shape().dim);
  auto& backend = backend_;
  ForwardState state;
  if (has_embedding()) state.tokens = DeviceBuffer<int32_t>(backend, BT);
  if (has_head()) state.targets = DeviceBuffer<int32_t>(backend, BT);
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
  be.attention_backward(dqkv_.data(), datty_.data(), a.qkv.data(), a.atty.data(),
                        a.att.data(), static_cast<int>(B_), static_cast<int>(T_), Cl, NHl);
  be.mixed_matmul_backward(dwidth1_.data(), g + p.qkv_w, g + p.qkv_b, dqkv_.data(), a.ln1.data(),
                           w + p.qkv_w, N, C, 3 * Cl,
                           precision_.block(layer, PrecisionPolicy::kQkv));
  all_reduce_on_backend(dwidth1_.data(), NC);
  be.layernorm_backward(dres, g + p.ln1_w, g + p.ln1_b, dwidth1_.data(), x, w + p.ln1_w,
                        a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
}

void TensorParallelGpt::all_reduce_on_backend(float* data, size_t count) {
  if (group_.sums_backend_memory()) {
    backend_.finish_compute();
    group_.all_reduce_backend_sum(data, count);
    return;
  }
  HostWindow window(backend_, data, count, HostWindow::Access::update, host_scratch_);
  group_.all_reduce_sum(window.data(), count);
  window.write_back();
}

backend::VocabSlice TensorParallelGpt::vocab_slice() const {
  return {static_cast<int>(layout_.vocab_begin()), static_cast<int>(layout_.vocab_local())};
}

// Each rank writes the rows of the tokens in its vocabulary slice (zeros elsewhere) and
// the all-reduce assembles the lookup. Rank 0 adds the replicated wpe before it, as it
// adds a row-parallel bias: the sum then holds it once, and as only two of the summed
// values are not zero, the result is wte + wpe rounded once, whatever the order.
void TensorParallelGpt::embedding_forward() {
  const int C = static_cast<int>(layout_.whole().shape().dim);
  const float* w = params_.data();
  float* out = slot_->residual.front().data();
  backend_.vocab_parallel_encoder_forward(out, slot_->tokens.data(), w + layout_.wte(),
                                          group_.rank() == 0 ? w + layout_.wpe() : nullptr,
                                          vocab_slice(), static_cast<int>(B_),
                                          static_cast<int>(T_), C);
  all_reduce_on_backend(out, static_cast<size_t>(B_ * T_) * static_cast<size_t>(C));
}

// Every rank adds the (replicated) output gradient into its own wte rows and into wpe,
// whose gradient is then the same on every rank, as for the other replicated parameters.
void TensorParallelGpt::embedding_backward() {
  float* g = grads_.data();
  backend_.vocab_parallel_encoder_backward(g + layout_.wte(), g + layout_.wpe(), dresidual_.data(),
                                           slot_->tokens.data(), vocab_slice(),
                                           static_cast<int>(B_), static_cast<int>(T_),
                                           static_cast<int>(layout_.whole().shape().dim));
}

// Vocabulary-parallel softmax cross-entropy (Megatron-LM): the logits of a token are
// spread over the ranks, so its maximum, its sum of exponentials and its target logit are
// each a reduction over the group. The maxima travel as one slot per rank in a sum
// all-reduce (an exact maximum without a max collective); the sums and target logits
// (zero on the ranks that do not hold the target) in a second one. The logits become
// this rank's slice of the probabilities, as softmax_cross_entropy_forward leaves them.
// The backend's ops do the work where the logits are; what crosses to the host for the
// all-reduces is N x ranks and 2N floats.
double TensorParallelGpt::cross_entropy_forward() {
  const int N = static_cast<int>(B_ * T_);
  const int ranks = group_.size();
  const backend::VocabSlice slice = vocab_slice();
  float* logits = slot_->logits.data();
  backend_.vocab_parallel_logit_max(max_slots_.data(), logits, N, slice.rows, group_.rank(),
                                    ranks);
  all_reduce_on_backend(max_slots_.data(), static_cast<size_t>(N) * static_cast<size_t>(ranks));
  backend_.vocab_parallel_exp_sums(logits, sums_and_targets_.data(), max_slots_.data(),
                                   slot_->targets.data(), slice, N, ranks);
  all_reduce_on_backend(sums_and_targets_.data(), 2 * static_cast<size_t>(N));
  backend_.vocab_parallel_softmax_loss(logits, slot_->losses.data(), sums_and_targets_.data(), N,
                                       slice.rows);
  // The backend's sum, in its order: the single-node loss's bits on every backend.
  return backend_.sum(slot_->losses.data(), static_cast<size_t>(N)) / static_cast<double>(N);
}

void TensorParallelGpt::cross_entropy_backward(float dloss) {
  backend_.vocab_parallel_cross_entropy_backward(slot_->logits.data(), slot_->targets.data(),
                                                 vocab_slice(), static_cast<int>(B_ * T_),
                                                 dloss);
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
  // The ids go over first, as in GptModel: copy_from_host synchronises a device's stream,
  // which holds the host up least before any kernel is queued.
  if (has_head()) {
    check_ids(targets, "target");
    backend_.copy_from_host(slot_->targets.data(), targets, BT * sizeof(int32_t));
  }
  if (has_embedding()) {
    check_ids(tokens, "token");
    backend_.copy_from_host(slot_->tokens.data(), tokens, BT * sizeof(int32_t));
    embedding_forward();
  }
  for (int64_t l = range_.begin; l < range_.end; ++l) {
    const size_t i = static_cast<size_t>(l - range_.begin);
    block_forward(l, activations_of(i), slot_->residual[i].data(), slot_->residual[i + 1].data());
  }
  if (!has_head()) return 0.0;
  const int N = static_cast<int>(BT);
  const int C = static_cast<int>(s.dim);
  const float* w = params_.data();
  backend_.layernorm_forward(slot_->lnf.data(), slot_->lnf_mean.data(), slot_->lnf_rstd.data(),
                             slot_->residual.back().data(), w + layout_.lnf_w(),
                             w + layout_.lnf_b(), N, C);
  backend_.mixed_matmul_forward(slot_->logits.data(), slot_->lnf.data(), w + layout_.wte(),
                                nullptr, N, C, static_cast<int>(layout_.vocab_local()),
                                precision_.head());
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
    backend_.mixed_matmul_backward(dwidth1_.data(), g + layout_.wte(), nullptr,
                                   slot_->logits.data(), slot_->lnf.data(), w + layout_.wte(),
                                   N, C, static_cast<int>(layout_.vocab_local()),
                                   precision_.head());
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
