// Direct reduce-scatter + all-gather all-reduce (see direct_rsag.hpp).
#include "comm/direct_rsag.hpp"

#include <algorithm>
#include <cstring>

#include "comm/reduce_kernels.hpp"

namespace dseek::comm {

DirectRsAgAllReduce::DirectRsAgAllReduce(OpContext ctx, const void* in, void* out, size_t count, DataType type,
                                         ReduceOp op, float scale)
    : Operation(std::move(ctx)), in_(in), out_(out), count_(count), type_(type), op_(op), scale_(scale) {}

void DirectRsAgAllReduce::start() {
  require_reducible(type_);
  es_ = element_size(type_);
  const int n = ranks(), r = rank();
  const size_t mine = shard_count(count_, n, r);
  inbox_ = pool().acquire(std::max<size_t>(1, mine * es_ * static_cast<size_t>(n)));
  acc_ = pool().acquire(std::max<size_t>(1, mine * sizeof(float)));
  const auto* in = static_cast<const std::byte*>(in_);
  for (int k = 1; k < n; ++k) {
    // Rotate the order, so the ranks do not all hit the same peer first.
    const int to = (r + k) % n, from = (r - k + n) % n;
    if (size_t len = shard_count(count_, n, to); len > 0)
      scatter_sends_.push_back(send_to(to, 0, in + shard_offset(count_, n, to) * es_, len * es_));
    if (mine > 0)
      scatter_recvs_.push_back(
          recv_from(from, 0, inbox_.data() + mine * es_ * static_cast<size_t>(from), mine * es_));
  }
}

bool DirectRsAgAllReduce::advance() {
  const int n = ranks(), r = rank();
  const size_t mine = shard_count(count_, n, r);
  auto* out = static_cast<std::byte*>(out_);
  if (phase_ == 0) {
    bool all = true;
    for (auto& io : scatter_recvs_) all = collect(io, false) && all;
    for (auto& io : scatter_sends_) collect(io, true);
    if (!all) return false;
    if (mine > 0) {
      // Rank order, so the sum does not depend on who owns the shard.
      auto* acc = reinterpret_cast<float*>(acc_.data());
      const auto* in = static_cast<const std::byte*>(in_);
      for (int g = 0; g < n; ++g) {
        const void* src = g == r ? static_cast<const void*>(in + shard_offset(count_, n, r) * es_)
                                 : static_cast<const void*>(inbox_.data() + mine * es_ * static_cast<size_t>(g));
        accumulate_f32(acc, src, mine, type_, op_, g == 0);
      }
      // Our own shard of `in` is never sent, so `out` may alias `in` here.
      store_from_f32(out + shard_offset(count_, n, r) * es_, acc, mine, type_, scale_);
      for (int k = 1; k < n; ++k)
        gather_sends_.push_back(send_to((r + k) % n, 1, out + shard_offset(count_, n, r) * es_, mine * es_));
    }
    phase_ = 1;
  }
  if (!gather_recvs_posted_) {
    // The peers' shards of `out` may be our input still being sent: wait for those sends.
    bool sent = true;
    for (auto& io : scatter_sends_) sent = collect(io, true) && sent;
    if (!sent) return false;
    for (int k = 1; k < n; ++k) {
      const int from = (r - k + n) % n;
      if (size_t len = shard_count(count_, n, from); len > 0)
        gather_recvs_.push_back(recv_from(from, 1, out + shard_offset(count_, n, from) * es_, len * es_));
    }
    gather_recvs_posted_ = true;
  }
  bool all = true;
  for (auto& io : gather_sends_) all = collect(io, true) && all;
  for (auto& io : gather_recvs_) all = collect(io, false) && all;
  return all;
}

}  // namespace dseek::comm
