// The two ends of GptModel (gpt_model.hpp): the token and position embedding, and the
// head (final LayerNorm, the projection tied to wte) with its softmax cross-entropy.
// Without a group they are the whole-vocabulary ops; a tensor rank holds a slice of the
// vocabulary and runs the vocabulary-parallel ops of Megatron-LM, whose reductions go
// over the group.
#include <algorithm>
#include <string>

#include "runtime/model/gpt_model.hpp"

namespace dseek::model {

// The slice's rows at or past real_vocab_ are padding (set_real_vocab).
backend::VocabSlice GptModel::vocab_slice() const {
  const int64_t begin = shard_.vocab_begin(), rows = shard_.vocab_local();
  const int64_t real = std::clamp<int64_t>(real_vocab_ - begin, 0, rows);
  return {static_cast<int>(begin), static_cast<int>(rows), static_cast<int>(rows - real)};
}

// A tensor rank writes the rows of the tokens in its vocabulary slice (zeros elsewhere)
// and the all-reduce assembles the lookup. Rank 0 adds the replicated wpe before it, as
// it adds a row-parallel bias: the sum then holds it once, and as only two of the summed
// values are not zero, the result is wte + wpe rounded once, whatever the order.
void GptModel::embedding_forward() {
  const int C = static_cast<int>(layout().shape().dim);
  const float* w = params_.data();
  float* out = slot_->residual.front().data();
  if (group_ == nullptr) {
    backend_.encoder_forward(out, slot_->tokens.data(), w + shard_.wte(), w + shard_.wpe(),
                             static_cast<int>(B_), static_cast<int>(T_), C);
    return;
  }
  backend_.vocab_parallel_encoder_forward(out, slot_->tokens.data(), w + shard_.wte(),
                                          shard_.rank() == 0 ? w + shard_.wpe() : nullptr,
                                          vocab_slice(), static_cast<int>(B_),
                                          static_cast<int>(T_), C);
  all_reduce_on_backend(out, static_cast<size_t>(B_ * T_) * static_cast<size_t>(C));
}

// A tensor rank adds the (replicated) output gradient into its own wte rows and into
// wpe, whose gradient is then the same on every rank, as for the other replicated
// parameters.
void GptModel::embedding_backward() {
  float* g = grads_.data();
  const int C = static_cast<int>(layout().shape().dim);
  if (group_ == nullptr) {
    backend_.encoder_backward(g + shard_.wte(), g + shard_.wpe(), dresidual_.data(),
                              slot_->tokens.data(), static_cast<int>(B_), static_cast<int>(T_), C);
    return;
  }
  backend_.vocab_parallel_encoder_backward(g + shard_.wte(), g + shard_.wpe(), dresidual_.data(),
                                           slot_->tokens.data(), vocab_slice(),
                                           static_cast<int>(B_), static_cast<int>(T_), C);
}

double GptModel::head_forward() {
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout().shape().dim);
  const size_t Cs = static_cast<size_t>(C);
  const int V = static_cast<int>(shard_.vocab_local());
  const float* w = params_.data();
  if (before_params_read_) {
    before_params_read_({shard_.lnf_w(), shard_.lnf_b() + Cs - shard_.lnf_w()});
    before_params_read_({shard_.wte(), static_cast<size_t>(V) * Cs});
  }
  backend_.layernorm_forward(slot_->lnf.data(), slot_->lnf_mean.data(), slot_->lnf_rstd.data(),
                             slot_->residual.back().data(), w + shard_.lnf_w(),
                             w + shard_.lnf_b(), N, C);
  backend_.mixed_matmul_forward(slot_->logits.data(), slot_->lnf.data(), w + shard_.wte(),
                                nullptr, N, C, V, precision_.head());
  return cross_entropy_forward();
}

void GptModel::head_backward(float dloss) {
  const int N = static_cast<int>(B_ * T_);
  const int C = static_cast<int>(layout().shape().dim);
  const float* w = params_.data();
  float* g = grads_.data();
  cross_entropy_backward(dloss);
  backend_.zero(dresidual_.data(), static_cast<size_t>(N) * C);
  // Column-parallel over the vocabulary for a tensor rank: d(lnf) is a partial sum.
  backend_.mixed_matmul_backward(dwidth1_.data(), g + shard_.wte(), nullptr,
                                 slot_->logits.data(), slot_->lnf.data(), w + shard_.wte(), N, C,
                                 static_cast<int>(shard_.vocab_local()), precision_.head());
  all_reduce_on_backend(dwidth1_.data(), static_cast<size_t>(N) * C);
  backend_.layernorm_backward(dresidual_.data(), g + shard_.lnf_w(), g + shard_.lnf_b(),
                              dwidth1_.data(), slot_->residual.back().data(), w + shard_.lnf_w(),
                              slot_->lnf_mean.data(), slot_->lnf_rstd.data(), N, C);
}

// Vocabulary-parallel softmax cross-entropy (Megatron-LM): the logits of a token are
// spread over the ranks, so its maximum, its sum of exponentials and its target logit are
// each a reduction over the group. The maxima travel as one slot per rank in a sum
// all-reduce (an exact maximum without a max collective); the sums and target logits
// (zero on the ranks that do not hold the target) in a second one. The logits become
// this rank's slice of the probabilities, as softmax_cross_entropy_forward leaves them.
// What crosses to the host for the all-reduces is N x ranks and 2N floats.
// A padded vocabulary without a group (real_vocab_ < vocab) runs the same pieces at one
// rank, with nothing to all-reduce: the fused op would take the padding into its softmax.
double GptModel::cross_entropy_forward() {
  const int N = static_cast<int>(B_ * T_);
  float* logits = slot_->logits.data();
  if (group_ == nullptr && real_vocab_ == layout().shape().vocab) {
    backend_.softmax_cross_entropy_forward(logits, slot_->losses.data(), slot_->targets.data(), N,
                                           static_cast<int>(layout().shape().vocab));
  } else {
    const int ranks = group_ != nullptr ? group_->size() : 1;
    const backend::VocabSlice slice = vocab_slice();
    backend_.vocab_parallel_logit_max(max_slots_.data(), logits, slice, N, shard_.rank(), ranks);
    all_reduce_on_backend(max_slots_.data(), static_cast<size_t>(N) * static_cast<size_t>(ranks));
    backend_.vocab_parallel_exp_sums(logits, sums_and_targets_.data(), max_slots_.data(),
                                     slot_->targets.data(), slice, N, ranks);
    all_reduce_on_backend(sums_and_targets_.data(), 2 * static_cast<size_t>(N));
    backend_.vocab_parallel_softmax_loss(logits, slot_->losses.data(), sums_and_targets_.data(), N,
                                         slice.rows);
  }
  // The backend's sum, in its order: the single-node loss's bits on every rank.
  return backend_.sum(slot_->losses.data(), static_cast<size_t>(N)) / static_cast<double>(N);
}

// The padded rows' probabilities are 0 (vocab_parallel_exp_sums), so their gradient is 0
// in either op.
void GptModel::cross_entropy_backward(float dloss) {
  const int N = static_cast<int>(B_ * T_);
  if (group_ == nullptr && real_vocab_ == layout().shape().vocab) {
    backend_.softmax_cross_entropy_backward(slot_->logits.data(), slot_->targets.data(), N,
                                            static_cast<int>(layout().shape().vocab), dloss);
    return;
  }
  backend_.vocab_parallel_cross_entropy_backward(slot_->logits.data(), slot_->targets.data(),
                                                 vocab_slice(), N, dloss);
}

}  // namespace dseek::model
