// Shared-memory all-reduce (see shm_allreduce.hpp).
//
// Why the two flags suffice: a rank overwrites its staging area for chunk v only after
// it saw every peer's `reduced` reach v-1 (so they are done reading it), and its result
// area only after it saw every peer's `staged` reach v, which a peer publishes only after
// it copied every result of chunk v-1 out.
#include "comm/shm/shm_allreduce.hpp"

#include <algorithm>
#include <cstring>

#include "comm/reduce_kernels.hpp"

namespace dseek::comm {

ShmAllReduce::ShmAllReduce(OpContext ctx, SharedSegments& segments, const void* in, void* out, size_t count,
                           DataType type, ReduceOp op, float scale)
    : Operation(std::move(ctx)), seg_(segments), in_(in), out_(out), count_(count), type_(type), op_(op),
      scale_(scale) {}

void ShmAllReduce::start() {
  require_reducible(type_);
  if (ranks() != seg_.ranks() || rank() != seg_.rank())
    throw CommError(ErrorKind::invalid_argument, "shared-memory all-reduce on a group that is not the whole world");
  es_ = element_size(type_);
  chunk_elems_ = std::max<size_t>(1, seg_.chunk_bytes() / es_);
  acc_ = pool().acquire(std::max<size_t>(1, shard_count(chunk_elems_, ranks(), 0) * sizeof(float)));
  ticket_ = seg_.take_ticket();
}

bool ShmAllReduce::peers_reached(bool reduced) const {
  for (int r = 0; r < ranks(); ++r) {
    if (r == rank()) continue;
    const auto& flag = reduced ? seg_.flags(r).reduced : seg_.flags(r).staged;
    if (flag.load(std::memory_order_acquire) < chunk_) return false;
  }
  return true;
}

bool ShmAllReduce::advance() {
  if (!seg_.serving(ticket_)) return false;  // an earlier all-reduce still uses the segments
  const int n = ranks(), me = rank();
  const auto* in = static_cast<const std::byte*>(in_);
  auto* out = static_cast<std::byte*>(out_);
  for (;;) {
    switch (phase_) {
      case Phase::stage:
        chunk_len_ = std::min(chunk_elems_, count_ - next_elem_);
        chunk_ = seg_.next_chunk();
        // Only the shards the peers reduce: ours is read from the input itself.
        for (int r = 0; r < n; ++r) {
          if (r == me) continue;
          const size_t offset = shard_offset(chunk_len_, n, r) * es_;
          std::memcpy(seg_.staging(me) + offset, in + next_elem_ * es_ + offset, shard_count(chunk_len_, n, r) * es_);
        }
        seg_.flags(me).staged.store(chunk_, std::memory_order_release);
        phase_ = Phase::reduce;
        [[fallthrough]];
      case Phase::reduce: {
        if (!peers_reached(false)) return false;
        const size_t mine = shard_count(chunk_len_, n, me), offset = shard_offset(chunk_len_, n, me) * es_;
        if (mine > 0) {
          auto* acc = reinterpret_cast<float*>(acc_.data());
          for (int r = 0; r < n; ++r) {
            const std::byte* src = r == me ? in + next_elem_ * es_ + offset : seg_.staging(r) + offset;
            accumulate_f32(acc, src, mine, type_, op_, r == 0);
          }
          // The input shard was read into `acc` already, so `out` may alias `in`.
          store_from_f32(out + next_elem_ * es_ + offset, acc, mine, type_, scale_);
          store_from_f32(seg_.result(me) + offset, acc, mine, type_, scale_);
        }
        seg_.flags(me).reduced.store(chunk_, std::memory_order_release);
        // Bytes that crossed between processes, as the ring would count them: the peers
        // read our shard of their input and our reduced shard, we read theirs.
        const uint64_t others = (chunk_len_ - mine) * es_;
        count_moved(others + static_cast<uint64_t>(n - 1) * mine * es_, others + static_cast<uint64_t>(n - 1) * mine * es_);
        phase_ = Phase::gather;
        [[fallthrough]];
      }
      case Phase::gather:
        if (!peers_reached(true)) return false;
        for (int r = 0; r < n; ++r) {
          if (r == me) continue;
          const size_t len = shard_count(chunk_len_, n, r), offset = shard_offset(chunk_len_, n, r) * es_;
          if (len > 0) std::memcpy(out + next_elem_ * es_ + offset, seg_.result(r) + offset, len * es_);
        }
        next_elem_ += chunk_len_;
        if (next_elem_ >= count_) {
          seg_.next_ticket_served();
          return true;
        }
        phase_ = Phase::stage;
        break;
    }
  }
}

}  // namespace dseek::comm
