// Recursive halving + recursive doubling all-reduce (see recursive_halving.hpp).
//
// Blocks: the buffer is cut into P blocks by the shard rule (group.hpp), block b owned at
// the end of the halving by the rank whose power-of-two rank is b. Halving step l pairs
// ranks differing in bit P >> (l + 1): the one with the bit clear keeps the lower half of
// the current range. Doubling step l pairs ranks differing in bit 1 << l: each sends its
// range and receives the partner's adjacent one. A step starts when the previous one's
// data arrived (one staging buffer serves every halving step: its contents were reduced
// by then); sends are only waited for where their source is written next: the half given
// away at halving step l is written by the receive of doubling step log2(P) - 1 - l (so
// out == in is safe), the input a folded rank sent by the unfold's receive.
#include "comm/recursive_halving.hpp"

#include <algorithm>
#include <cstring>

#include "comm/reduce_kernels.hpp"

namespace dseek::comm {

RecursiveHalvingAllReduce::RecursiveHalvingAllReduce(OpContext ctx, const void* in, void* out, size_t count,
                                                     DataType type, ReduceOp op, float scale)
    : Operation(std::move(ctx)), in_(in), out_(out), count_(count), type_(type), op_(op), scale_(scale) {}

int RecursiveHalvingAllReduce::halving_mask(int level) const {
  // The largest exchange first (MPICH and OpenMPI start with the neighbour, bit 1: no
  // difference measured at 4 ranks on 2 cores, bench/RESULTS.md).
  return pow2_ >> (level + 1);
}

int RecursiveHalvingAllReduce::real_rank(int virtual_rank) const {
  return virtual_rank < extra_ ? 2 * virtual_rank + 1 : virtual_rank + extra_;
}

size_t RecursiveHalvingAllReduce::block_offset(int block) const { return shard_offset(count_, pow2_, block); }

std::byte* RecursiveHalvingAllReduce::at(void* base, size_t element) const {
  return static_cast<std::byte*>(base) + element * es_;
}
const std::byte* RecursiveHalvingAllReduce::at(const void* base, size_t element) const {
  return static_cast<const std::byte*>(base) + element * es_;
}

void RecursiveHalvingAllReduce::start() {
  require_reducible(type_);
  es_ = element_size(type_);
  const int n = ranks(), r = rank();
  while (pow2_ * 2 <= n) {
    pow2_ *= 2;
    ++levels_;
  }
  extra_ = n - pow2_;
  const bool paired = r < 2 * extra_;
  vrank_ = paired ? (r % 2 == 1 ? r / 2 : -1) : r - extra_;
  steps_ = vrank_ < 0 ? 2 : 2 * levels_ + (paired ? 2 : 0);
  first_halving_step_ = paired ? 1 : 0;
  sends_.resize(static_cast<size_t>(steps_));
  lo_ = 0;
  len_ = pow2_;
  if (n == 1) {
    if (out_ != in_) std::memmove(out_, in_, count_ * es_);
    if (scale_ != 1.0f) scale_in_place(out_, count_, type_, scale_);
    return;
  }
  // The largest message received into it: the folded neighbour's whole input, else the
  // half kept at the first halving step (the later halves lie inside it).
  const int first_kept = vrank_ & (pow2_ / 2);  // block 0 or P/2
  const size_t inbox_elems = paired ? count_ : block_offset(first_kept + pow2_ / 2) - block_offset(first_kept);
  inbox_ = pool().acquire(std::max<size_t>(1, inbox_elems * es_));
}

RecursiveHalvingAllReduce::Step RecursiveHalvingAllReduce::step_kind(int index, int* level) const {
  *level = 0;
  if (vrank_ < 0) return index == 0 ? Step::fold_send : Step::unfold_recv;
  if (rank() < 2 * extra_) {
    if (index == 0) return Step::fold_recv;
    --index;
  }
  if (index < levels_) {
    *level = index;
    return Step::halve;
  }
  index -= levels_;
  if (index < levels_) {
    *level = index;
    return Step::double_up;
  }
  return Step::unfold_send;
}

void RecursiveHalvingAllReduce::post() {
  kind_ = step_kind(step_, &level_);
  const size_t whole = count_ * es_;
  // Pieces: 0 the fold, 1 + l halving step l, 1 + P' + l doubling step l, 1 + 2 P' the
  // unfold (P' = log2 P): distinct within the operation.
  const auto halving_piece = static_cast<uint32_t>(1 + level_);
  const auto doubling_piece = static_cast<uint32_t>(1 + levels_ + level_);
  const auto unfold_piece = static_cast<uint32_t>(1 + 2 * levels_);
  switch (kind_) {
    case Step::fold_send:
      sends_[static_cast<size_t>(step_)] = send_to(rank() + 1, 0, in_, whole);
      break;
    case Step::fold_recv:
      recv_ = recv_from(rank() - 1, 0, inbox_.data(), whole);
      break;
    case Step::halve: {
      const int mask = halving_mask(level_);
      partner_ = vrank_ ^ mask;
      const int half = len_ / 2;
      const bool upper = (vrank_ & mask) != 0;
      keep_lo_ = upper ? lo_ + half : lo_;
      keep_len_ = half;
      const int give_lo = upper ? lo_ : lo_ + half;
      const void* src = reduced_any_ ? out_ : in_;
      const size_t give_first = block_offset(give_lo), give_elems = block_offset(give_lo + half) - give_first;
      const size_t keep_elems = block_offset(keep_lo_ + half) - block_offset(keep_lo_);
      if (give_elems > 0) sends_[static_cast<size_t>(step_)] = send_to(real_rank(partner_), halving_piece, at(src, give_first), give_elems * es_);
      if (keep_elems > 0) recv_ = recv_from(real_rank(partner_), halving_piece, inbox_.data(), keep_elems * es_);
      break;
    }
    case Step::double_up: {
      partner_ = vrank_ ^ halving_mask(levels_ - 1 - level_);
      const int partner_lo = lo_ ^ len_;  // the sibling range: lo_ is a multiple of len_
      const size_t own_first = block_offset(lo_), own_elems = block_offset(lo_ + len_) - own_first;
      const size_t their_first = block_offset(partner_lo), their_elems = block_offset(partner_lo + len_) - their_first;
      if (own_elems > 0) sends_[static_cast<size_t>(step_)] = send_to(real_rank(partner_), doubling_piece, at(out_, own_first), own_elems * es_);
      if (their_elems > 0)
        recv_ = recv_from(real_rank(partner_), doubling_piece, at(out_, their_first), their_elems * es_);
      break;
    }
    case Step::unfold_send:
      sends_[static_cast<size_t>(step_)] = send_to(rank() - 1, unfold_piece, out_, whole);
      break;
    case Step::unfold_recv:
      recv_ = recv_from(rank() + 1, unfold_piece, out_, whole);
      break;
  }
}

void RecursiveHalvingAllReduce::finish() {
  switch (kind_) {
    case Step::fold_recv:
      // The folded neighbour is the lower rank: its input first.
      reduce_into(out_, inbox_.data(), in_, count_, type_, op_);
      reduced_any_ = true;
      break;
    case Step::halve: {
      const size_t first = block_offset(keep_lo_), elems = block_offset(keep_lo_ + keep_len_) - first;
      const std::byte* mine = at(reduced_any_ ? out_ : in_, first);
      const std::byte* theirs = inbox_.data();
      // real_rank() keeps the order of the power-of-two ranks: lower rank first.
      if (elems > 0) {
        if (partner_ < vrank_) reduce_into(at(out_, first), theirs, mine, elems, type_, op_);
        else reduce_into(at(out_, first), mine, theirs, elems, type_, op_);
        if (level_ == levels_ - 1 && scale_ != 1.0f) scale_in_place(at(out_, first), elems, type_, scale_);
      }
      reduced_any_ = true;
      lo_ = keep_lo_;
      len_ = keep_len_;
      break;
    }
    case Step::double_up:
      lo_ = std::min(lo_, lo_ ^ len_);
      len_ *= 2;
      break;
    case Step::fold_send:
    case Step::unfold_send:
    case Step::unfold_recv:
      break;
  }
}

bool RecursiveHalvingAllReduce::may_post() {
  int level = 0;
  switch (step_kind(step_, &level)) {
    case Step::double_up:
      // Its receive overwrites the half this rank gave away at halving step
      // levels - 1 - level: that send must be done.
      return collect(sends_[static_cast<size_t>(first_halving_step_ + levels_ - 1 - level)], true);
    case Step::unfold_recv:
      return collect(sends_[0], true);  // `out` may be the input the fold sent
    default:
      return true;
  }
}

bool RecursiveHalvingAllReduce::advance() {
  while (step_ < steps_) {
    if (!posted_) {
      if (!may_post()) return false;
      post();
      posted_ = true;
    }
    // A step is over when its data arrived: the next one need not wait for the partner to
    // have taken ours (which needs the partner scheduled again), only may_post() does.
    if (!collect(recv_, false)) return false;
    finish();
    ++step_;
    posted_ = false;
  }
  bool all = true;
  for (auto& io : sends_) all = collect(io, true) && all;
  return all;
}

}  // namespace dseek::comm
