// Direct and chained broadcast (see broadcast.hpp). Column k runs in slot k % depth on
// every rank, so pieces in flight between two ranks are used in the same order.
#include "comm/broadcast.hpp"

#include <algorithm>

#include "comm/tags.hpp"

namespace dseek::comm {

Broadcast::Broadcast(OpContext ctx, void* buffer, size_t bytes, int root)
    : Operation(std::move(ctx)), buffer_(static_cast<std::byte*>(buffer)), bytes_(bytes), root_(root) {}

void Broadcast::start() {
  const int n = ranks(), r = rank();
  if (n == 1 || bytes_ == 0) return;
  pos_ = (r - root_ + n) % n;
  chain_ = n > 2 && bytes_ > options().small_message_bytes;
  if (!chain_) {
    if (r == root_) {
      for (int g = 0; g < n; ++g)
        if (g != root_) direct_.push_back(send_to(g, 0, buffer_, bytes_));
    } else {
      direct_.push_back(recv_from(root_, 0, buffer_, bytes_));
    }
    return;
  }
  chunk_ = std::max<size_t>(1, options().chunk_bytes);
  columns_ = (bytes_ + chunk_ - 1) / chunk_;
  const size_t depth = std::min<size_t>({static_cast<size_t>(std::max(1, options().pipeline_depth)), columns_, kMaxPieces});
  slots_.resize(depth);
  for (size_t j = 0; j < depth; ++j) {
    slots_[j].k = j;
    slots_[j].active = true;
  }
}

bool Broadcast::advance() {
  if (ranks() == 1 || bytes_ == 0) return true;
  return chain_ ? advance_chain() : advance_direct();
}

bool Broadcast::advance_direct() {
  bool all = true;
  const bool is_root = rank() == root_;
  for (auto& io : direct_) all = collect(io, is_root) && all;
  return all;
}

bool Broadcast::advance_chain() {
  const int n = ranks();
  const int prev = (rank() - 1 + n) % n, next = (rank() + 1) % n;
  const bool has_prev = pos_ > 0, has_next = pos_ < n - 1;
  for (size_t j = 0; j < slots_.size(); ++j) {
    Column& c = slots_[j];
    while (c.active) {
      std::byte* data = buffer_ + c.k * chunk_;
      const size_t len = std::min(chunk_, bytes_ - c.k * chunk_);
      const auto piece = static_cast<uint32_t>(j);
      if (has_prev && !c.received) {
        if (!c.posted_recv) {
          c.recv = recv_from(prev, piece, data, len);
          c.posted_recv = true;
        }
        if (!collect(c.recv, false)) break;
        c.received = true;
      }
      if (has_next) {
        if (!c.posted_send) {
          c.send = send_to(next, piece, data, len);
          c.posted_send = true;
        }
        if (!collect(c.send, true)) break;
      }
      ++done_columns_;
      c.k += slots_.size();
      c.received = c.posted_recv = c.posted_send = false;
      c.active = c.k < columns_;
    }
  }
  return done_columns_ == columns_;
}

}  // namespace dseek::comm
