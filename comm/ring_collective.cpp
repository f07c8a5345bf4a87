// Ring reduce-scatter / all-gather / all-reduce (see ring_collective.hpp).
//
// Segment i is shard i of the buffer. Rank r's reduce-scatter step t sends segment
// r-t-1 and receives segment r-t-2 from its left neighbour, adding its own input to it;
// after N-1 steps it holds the full reduction of segment r. All-gather step s sends
// segment r-s and receives segment r-s-1. Column k of every segment moves through the
// steps in order; a column's next step starts when both its send and receive of the
// previous one completed (so a staging slot or output region is never reused while a
// message still reads it). Column k always runs in slot k % depth on every rank, so the
// pieces in flight between two ranks are used in the same order on both sides.
#include "comm/ring_collective.hpp"

#include <algorithm>
#include <cstring>

#include "comm/reduce_kernels.hpp"
#include "comm/tags.hpp"

namespace dseek::comm {

RingCollective::RingCollective(OpContext ctx, Kind kind, const void* in, void* out, size_t count, DataType type,
                               ReduceOp op, float scale)
    : Operation(std::move(ctx)), kind_(kind), in_(in), out_(out), count_(count), type_(type), op_(op), scale_(scale) {}

size_t RingCollective::seg_offset(int seg) const { return shard_offset(count_, ranks(), seg); }

size_t RingCollective::chunk_len(int seg, size_t k) const {
  const size_t len = shard_count(count_, ranks(), seg);
  const size_t begin = k * chunk_elems_;
  return begin >= len ? 0 : std::min(chunk_elems_, len - begin);
}

std::byte* RingCollective::elem(void* base, size_t index) const { return static_cast<std::byte*>(base) + index * es_; }
const std::byte* RingCollective::elem(const void* base, size_t index) const {
  return static_cast<const std::byte*>(base) + index * es_;
}

void RingCollective::start() {
  const int n = ranks();
  es_ = element_size(type_);
  if (kind_ != Kind::all_gather) require_reducible(type_);
  const int r = rank();
  if (n == 1) {
    // Nothing to exchange: the result is the input (scaled for an average).
    const size_t elems = count_;
    if (out_ != in_) std::memmove(out_, in_, elems * es_);
    if (kind_ != Kind::all_gather && scale_ != 1.0f) scale_in_place(out_, elems, type_, scale_);
    return;
  }
  if (kind_ == Kind::all_gather) {
    void* mine = elem(out_, seg_offset(r));
    if (mine != in_) std::memmove(mine, in_, shard_count(count_, n, r) * es_);
  }
  chunk_elems_ = std::max<size_t>(1, options().chunk_bytes / es_);
  columns_ = (shard_count(count_, n, 0) + chunk_elems_ - 1) / chunk_elems_;
  total_steps_ = 2 * (n - 1);
  first_step_ = kind_ == Kind::all_gather ? n - 1 : 0;
  end_step_ = kind_ == Kind::reduce_scatter ? n - 1 : 2 * (n - 1);
  // Keep the pieces in flight distinct (tags.hpp): depth * steps pieces at most.
  size_t depth = static_cast<size_t>(std::max(1, options().pipeline_depth));
  depth = std::min(depth, std::max<size_t>(1, kMaxPieces / static_cast<size_t>(total_steps_)));
  depth = std::min(depth, columns_);
  slots_.resize(depth);
  for (size_t j = 0; j < depth; ++j) {
    Column& c = slots_[j];
    c.k = j;
    c.step = first_step_;
    c.active = true;
    if (kind_ != Kind::all_gather) {
      c.slot[0] = pool().acquire(chunk_elems_ * es_);
      c.slot[1] = pool().acquire(chunk_elems_ * es_);
    }
  }
}

void RingCollective::post(Column& c) {
  const int n = ranks(), r = rank(), t = c.step;
  const int right = mod(r + 1), left = mod(r - 1);
  const size_t slot_index = static_cast<size_t>(&c - slots_.data());
  const uint32_t piece = static_cast<uint32_t>(slot_index * static_cast<size_t>(total_steps_) + static_cast<size_t>(t));
  const size_t ko = c.k * chunk_elems_;
  if (t < n - 1) {  // reduce-scatter step
    const int send_seg = mod(r - t - 1), recv_seg = mod(r - t - 2);
    if (size_t len = chunk_len(send_seg, c.k); len > 0) {
      const void* src = t == 0 ? static_cast<const void*>(elem(in_, seg_offset(send_seg) + ko))
                               : static_cast<const void*>(c.slot[(t - 1) % 2].data());
      c.send = send_to(right, piece, src, len * es_);
    }
    if (size_t len = chunk_len(recv_seg, c.k); len > 0) c.recv = recv_from(left, piece, c.slot[t % 2].data(), len * es_);
  } else {  // all-gather step
    const int s = t - (n - 1);
    const int send_seg = mod(r - s), recv_seg = mod(r - s - 1);
    if (size_t len = chunk_len(send_seg, c.k); len > 0)
      c.send = send_to(right, piece, elem(out_, seg_offset(send_seg) + ko), len * es_);
    if (size_t len = chunk_len(recv_seg, c.k); len > 0)
      c.recv = recv_from(left, piece, elem(out_, seg_offset(recv_seg) + ko), len * es_);
  }
  c.posted = true;
}

void RingCollective::finish_step(Column& c) {
  const int n = ranks(), r = rank(), t = c.step;
  if (t >= n - 1) return;  // all-gather: the data landed in place
  const int recv_seg = mod(r - t - 2);
  const size_t len = chunk_len(recv_seg, c.k);
  if (len == 0) return;
  std::byte* partial = c.slot[t % 2].data();
  const std::byte* mine = elem(in_, seg_offset(recv_seg) + c.k * chunk_elems_);
  if (t == n - 2) {  // last step: recv_seg == r, the result goes to the output
    std::byte* dst = kind_ == Kind::all_reduce ? elem(out_, seg_offset(r) + c.k * chunk_elems_)
                                               : elem(out_, c.k * chunk_elems_);
    reduce_into(dst, partial, mine, len, type_, op_);
    if (scale_ != 1.0f) scale_in_place(dst, len, type_, scale_);
  } else {
    reduce_into(partial, partial, mine, len, type_, op_);
  }
}

bool RingCollective::advance() {
  if (ranks() == 1) return true;
  for (Column& c : slots_) {
    while (c.active) {
      if (c.step == end_step_) {
        ++done_columns_;
        c.k += slots_.size();
        if (c.k < columns_) {
          c.step = first_step_;
        } else {
          c.active = false;
        }
        continue;
      }
      if (!c.posted) post(c);
      const bool sent = collect(c.send, true);
      const bool received = collect(c.recv, false);
      if (!sent || !received) break;
      finish_step(c);
      ++c.step;
      c.posted = false;
    }
  }
  return done_columns_ == columns_;
}

}  // namespace dseek::comm
