// Implementation of tensor_parallel_layout.hpp.
#include "runtime/model/tensor_parallel_layout.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dseek::model {

namespace {
void require_divisible(int64_t value, const char* what, int ranks) {
  if (ranks < 1 || value % ranks != 0)
    throw std::invalid_argument("tensor parallelism: parallel.tensor = " + std::to_string(ranks) +
                                " must divide " + what + " = " + std::to_string(value));
}
}  // namespace

TensorParallelLayout::TensorParallelLayout(const GptShape& shape, int rank, int ranks)
    : whole_(shape), rank_(rank), ranks_(ranks) {
  if (rank < 0 || rank >= ranks)
    throw std::invalid_argument("tensor parallelism: rank " + std::to_string(rank) +
                                " outside a group of " + std::to_string(ranks));
  require_divisible(shape.heads, "model.heads", ranks);
  require_divisible(shape.vocab, "the vocabulary size", ranks);
  const int64_t C = shape.dim;
  vocab_local_ = shape.vocab / ranks;
  heads_local_ = shape.heads / ranks;
  channels_local_ = C / ranks;  // heads divide C, and T divides heads
  const int64_t H4 = hidden_local();

  wte_ = add_rows(whole_.wte(), vocab_begin(), vocab_local_, C);
  wpe_ = add_whole(whole_.wpe(), static_cast<size_t>(shape.context * C));
  const size_t Cs = static_cast<size_t>(C);
  for (int64_t l = 0; l < shape.layers; ++l) {
    const BlockParams& w = whole_.block(l);
    const int64_t c0 = channels_local_ * rank;
    BlockParams b{};
    b.ln1_w = add_whole(w.ln1_w, Cs);
    b.ln1_b = add_whole(w.ln1_b, Cs);
    b.qkv_w = add_rows(w.qkv_w, c0, channels_local_, C);          // q
    add_rows(w.qkv_w, C + c0, channels_local_, C);                // k
    add_rows(w.qkv_w, 2 * C + c0, channels_local_, C);            // v
    b.qkv_b = add_rows(w.qkv_b, c0, channels_local_, 1);
    add_rows(w.qkv_b, C + c0, channels_local_, 1);
    add_rows(w.qkv_b, 2 * C + c0, channels_local_, 1);
    b.attn_proj_w = add_columns(w.attn_proj_w, C, C, c0, channels_local_);
    b.attn_proj_b = add_whole(w.attn_proj_b, Cs);
    b.ln2_w = add_whole(w.ln2_w, Cs);
    b.ln2_b = add_whole(w.ln2_b, Cs);
    b.fc_w = add_rows(w.fc_w, H4 * rank, H4, C);
    b.fc_b = add_rows(w.fc_b, H4 * rank, H4, 1);
    b.fc_proj_w = add_columns(w.fc_proj_w, C, 4 * C, H4 * rank, H4);
    b.fc_proj_b = add_whole(w.fc_proj_b, Cs);
    blocks_.push_back(b);
  }
  lnf_w_ = add_whole(whole_.lnf_w(), Cs);
  lnf_b_ = add_whole(whole_.lnf_b(), Cs);
}

size_t TensorParallelLayout::add_whole(size_t whole_offset, size_t count) {
  const size_t at = total_;
  segments_.push_back({at, whole_offset, count});
  replicated_.push_back({at, count});
  total_ += count;
  return at;
}

size_t TensorParallelLayout::add_rows(size_t whole_offset, int64_t row0, int64_t rows,
                                      int64_t cols) {
  const size_t at = total_;
  const size_t count = static_cast<size_t>(rows * cols);
  segments_.push_back({at, whole_offset + static_cast<size_t>(row0 * cols), count});
  total_ += count;
  return at;
}

size_t TensorParallelLayout::add_columns(size_t whole_offset, int64_t rows, int64_t cols,
                                         int64_t col0, int64_t cols_taken) {
  const size_t at = total_;
  for (int64_t r = 0; r < rows; ++r) {
    segments_.push_back({total_, whole_offset + static_cast<size_t>(r * cols + col0),
                         static_cast<size_t>(cols_taken)});
    total_ += static_cast<size_t>(cols_taken);
  }
  return at;
}

bool TensorParallelLayout::replicated(size_t shard_offset) const {
  return std::any_of(replicated_.begin(), replicated_.end(), [&](const ParamRange& r) {
    return shard_offset >= r.offset && shard_offset < r.end();
  });
}

void TensorParallelLayout::scatter(const float* whole, float* shard) const {
  for (const ShardSegment& s : segments_)
    std::memcpy(shard + s.shard_offset, whole + s.whole_offset, s.count * sizeof(float));
}

void TensorParallelLayout::gather(const float* shard, float* whole) const {
  for (const ShardSegment& s : segments_)
    std::memcpy(whole + s.whole_offset, shard + s.shard_offset, s.count * sizeof(float));
}

}  // namespace dseek::model
