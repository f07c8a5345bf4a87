// Which part of the whole GPT model's parameters rank t of a tensor-parallel group of T
// holds (T = 1: all of it, at ParamLayout's offsets), and where that part lies in the
// rank's own flat buffer (Megatron-LM's layout):
//
//   wte             rows [t V/T, (t+1) V/T)  vocabulary-parallel embedding and head
//   qkv.weight/bias rows of q, k and v for heads [t H/T, (t+1) H/T)  column-parallel
//   attn.proj.weight columns of those heads' channels                 row-parallel
//   mlp.fc.weight/bias rows [t 4C/T, (t+1) 4C/T)                      column-parallel
//   mlp.proj.weight  the matching columns                              row-parallel
//   wpe, LayerNorms, attn.proj.bias, mlp.proj.bias, lnf: whole, replicated on every rank
//
// The shard's flat buffer keeps the whole model's tensor order (wte, wpe, blocks, lnf),
// so a block is still one contiguous slice. `segments()` maps each contiguous run of
// the shard to the whole model's flat buffer: scattering the whole model into shards,
// gathering shards back (the parity tests), and initialising a shard with the whole
// model's values (init is a pure function of the whole model's parameter index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/model/param_layout.hpp"

namespace dseek::model {

// `count` floats at `shard_offset` in the shard are those at `whole_offset` in the whole
// model's flat buffer.
struct ShardSegment {
  size_t shard_offset = 0;
  size_t whole_offset = 0;
  size_t count = 0;
};

class TensorParallelLayout {
 public:
  // Throws std::invalid_argument naming what T must divide (heads, vocab).
  TensorParallelLayout(const GptShape& shape, int rank, int ranks);

  const ParamLayout& whole() const { return whole_; }
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  size_t total() const { return total_; }

  // Sizes of this rank's slice: vocabulary rows, attention channels (heads * head
  // size), heads, MLP hidden width.
  int64_t vocab_begin() const { return vocab_local_ * rank_; }
  int64_t vocab_local() const { return vocab_local_; }
  int64_t channels_local() const { return channels_local_; }
  int64_t heads_local() const { return heads_local_; }
  int64_t hidden_local() const { return 4 * whole_.shape().dim / ranks_; }

  // Offsets into the shard's buffer, the same fields as the whole model's.
  size_t wte() const { return wte_; }
  size_t wpe() const { return wpe_; }
  const BlockParams& block(int64_t layer) const { return blocks_[static_cast<size_t>(layer)]; }
  // [begin, end) of block `layer`'s part in the shard's buffer (a block is contiguous).
  size_t block_begin(int64_t layer) const { return block(layer).ln1_w; }
  size_t block_end(int64_t layer) const {
    return block(layer).fc_proj_b + static_cast<size_t>(whole_.shape().dim);
  }
  size_t lnf_w() const { return lnf_w_; }
  size_t lnf_b() const { return lnf_b_; }

  const std::vector<ShardSegment>& segments() const { return segments_; }
  // Whether the shard offset belongs to a tensor every rank holds whole (its gradient is
  // computed identically by every rank of the group).
  bool replicated(size_t shard_offset) const;

  // shard[s.shard_offset ..] = whole[s.whole_offset ..] for every segment, and back.
  void scatter(const float* whole, float* shard) const;
  void gather(const float* shard, float* whole) const;

 private:
  size_t add_whole(size_t whole_offset, size_t count);
  // Rows [row0, row0 + rows) of a (.., cols) matrix at whole_offset.
  size_t add_rows(size_t whole_offset, int64_t row0, int64_t rows, int64_t cols);
  // Columns [col0, col0 + cols_taken) of every row of a (rows, cols) matrix.
  size_t add_columns(size_t whole_offset, int64_t rows, int64_t cols, int64_t col0,
                     int64_t cols_taken);

  ParamLayout whole_;
  int rank_, ranks_;
  int64_t vocab_local_ = 0, channels_local_ = 0, heads_local_ = 0;
  size_t wte_ = 0, wpe_ = 0, lnf_w_ = 0, lnf_b_ = 0, total_ = 0;
  std::vector<BlockParams> blocks_;
  std::vector<ShardSegment> segments_;
  std::vector<ParamRange> replicated_;
};

}  // namespace dseek::model
