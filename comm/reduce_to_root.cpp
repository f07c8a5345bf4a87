// Chunked reduce to a root (see reduce_to_root.hpp).
#include "comm/reduce_to_root.hpp"

#include <algorithm>
#include <cstring>

#include "comm/reduce_kernels.hpp"
#include "comm/tags.hpp"

namespace dseek::comm {

ReduceToRoot::ReduceToRoot(OpContext ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op, int root)
    : Operation(std::move(ctx)), in_(in), out_(out), count_(count), type_(type), op_(op), root_(root) {}

void ReduceToRoot::start() {
  require_reducible(type_);
  es_ = element_size(type_);
  if (ranks() == 1) {
    if (out_ != in_) std::memmove(out_, in_, count_ * es_);
    return;
  }
  chunk_elems_ = std::max<size_t>(1, options().chunk_bytes / es_);
  columns_ = (count_ + chunk_elems_ - 1) / chunk_elems_;
  const size_t depth =
      std::min<size_t>({static_cast<size_t>(std::max(1, options().pipeline_depth)), columns_, kMaxPieces});
  slots_.resize(depth);
  for (size_t j = 0; j < depth; ++j) {
    slots_[j].k = j;
    slots_[j].active = true;
    if (rank() == root_) {
      slots_[j].inbox = pool().acquire(chunk_elems_ * es_ * static_cast<size_t>(ranks()));
      slots_[j].acc = pool().acquire(chunk_elems_ * sizeof(float));
    }
  }
}

void ReduceToRoot::post(Column& c, uint32_t piece) {
  const size_t begin = c.k * chunk_elems_, len = std::min(chunk_elems_, count_ - begin);
  if (rank() != root_) {
    c.ios.push_back(send_to(root_, piece, static_cast<const std::byte*>(in_) + begin * es_, len * es_));
  } else {
    for (int g = 0; g < ranks(); ++g)
      if (g != root_)
        c.ios.push_back(recv_from(g, piece, c.inbox.data() + static_cast<size_t>(g) * chunk_elems_ * es_, len * es_));
  }
  c.posted = true;
}

void ReduceToRoot::reduce(Column& c) {
  const size_t begin = c.k * chunk_elems_, len = std::min(chunk_elems_, count_ - begin);
  auto* acc = reinterpret_cast<float*>(c.acc.data());
  for (int g = 0; g < ranks(); ++g) {
    const void* src = g == root_ ? static_cast<const void*>(static_cast<const std::byte*>(in_) + begin * es_)
                                 : static_cast<const void*>(c.inbox.data() + static_cast<size_t>(g) * chunk_elems_ * es_);
    accumulate_f32(acc, src, len, type_, op_, g == 0);
  }
  store_from_f32(static_cast<std::byte*>(out_) + begin * es_, acc, len, type_, 1.0f);
}

bool ReduceToRoot::advance() {
  if (ranks() == 1) return true;
  const bool is_root = rank() == root_;
  for (size_t j = 0; j < slots_.size(); ++j) {
    Column& c = slots_[j];
    while (c.active) {
      if (!c.posted) post(c, static_cast<uint32_t>(j));
      bool all = true;
      for (auto& io : c.ios) all = collect(io, !is_root) && all;
      if (!all) break;
      if (is_root) reduce(c);
      c.ios.clear();
      c.posted = false;
      ++done_columns_;
      c.k += slots_.size();
      c.active = c.k < columns_;
    }
  }
  return done_columns_ == columns_;
}

}  // namespace dseek::comm
