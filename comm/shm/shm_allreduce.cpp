// Shared-memory all-reduce (see shm_allreduce.hpp).
//
// The order on every rank: stage(1), then per chunk v: reduce(v), stage(v+1) if there is
// one, gather(v). The k-th chunk of an all-reduce uses slot k % 2 of each area, so a
// chunk never shares a slot with the one before it in the same all-reduce, and an
// all-reduce of one chunk always uses slot 0 (the same warm cache lines every call).
// Why the two flags suffice, for a chunk w whose slot chunk u < w used last:
// - stage(w) overwrites the staging slot the peers read in reduce(u). If w is the first
//   chunk of its all-reduce, we ran gather(w-1) before, which waited for every peer's
//   `reduced` to reach w-1 >= u; otherwise u <= w-2 and we ran gather(w-2) before.
// - reduce(w) overwrites the result slot the peers read in gather(u); it waits for every
//   peer's `staged` to reach w, published in stage(w), which a peer runs after its
//   gather(w-1) if w is the first chunk of its all-reduce, else after its gather(w-2),
//   and u <= w-2 then.
// The input of chunk w+1 is staged before chunk w's output is gathered, and chunks do
// not overlap, so `out` may alias `in`.
//
// Within a slot, a rank places its data half a page from its output's offset in a page
// (alias_offset.hpp: with both on page boundaries and a std::vector's data 16 bytes past
// one, the reduce and the gather ran 2.5-5x slower at 4 ranks and 1 MiB), and publishes
// the place with the flag (`staged_at`, `reduced_at`). A peer reads it after the flag.
// The place changes only from one all-reduce to the next (chunks are whole pages, so
// every chunk of a call has the same offset in a page), and a rank publishes its next
// call's staging place after every peer reduced its last chunk (gather waited for that),
// its next result place after every peer staged the next call (so gathered this one).
#include "comm/shm/shm_allreduce.hpp"

#include <algorithm>
#include <cstring>

#include "comm/alias_offset.hpp"
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
  sources_.resize(static_cast<size_t>(ranks()));
  ticket_ = seg_.take_ticket();
}

bool ShmAllReduce::peers_reached(bool reduced, uint64_t chunk) const {
  for (int r = 0; r < ranks(); ++r) {
    if (r == rank()) continue;
    const auto& flag = reduced ? seg_.flags(r).reduced : seg_.flags(r).staged;
    if (flag.load(std::memory_order_acquire) < chunk) return false;
  }
  return true;
}

ShmAllReduce::Chunk ShmAllReduce::stage(size_t first) {
  const int n = ranks(), me = rank();
  const auto* in = static_cast<const std::byte*>(in_) + first * es_;
  const Chunk c{seg_.next_chunk(), static_cast<int>((first / chunk_elems_) % SharedSegments::kSlots), first,
                std::min(chunk_elems_, count_ - first)};
  std::byte* slot = seg_.staging(me, c.slot);
  std::byte* staging = half_page_apart(slot, static_cast<std::byte*>(out_) + first * es_);
  // Only the shards the peers reduce: ours is read from the input itself.
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const size_t offset = shard_offset(c.len, n, r) * es_;
    std::memcpy(staging + offset, in + offset, shard_count(c.len, n, r) * es_);
  }
  seg_.flags(me).staged_at.store(static_cast<uint32_t>(staging - slot), std::memory_order_relaxed);
  seg_.flags(me).staged.store(c.number, std::memory_order_release);
  return c;
}

void ShmAllReduce::reduce(const Chunk& c) {
  const int n = ranks(), me = rank();
  const auto* in = static_cast<const std::byte*>(in_) + c.first * es_;
  auto* out = static_cast<std::byte*>(out_) + c.first * es_;
  const size_t mine = shard_count(c.len, n, me), offset = shard_offset(c.len, n, me) * es_;
  // In rank order, so each element sums its ranks in the same order whoever owns it.
  for (int r = 0; r < n; ++r)
    sources_[static_cast<size_t>(r)] =
        (r == me ? in : seg_.staging(r, c.slot) + seg_.flags(r).staged_at.load(std::memory_order_relaxed)) + offset;
  std::byte* slot = seg_.result(me, c.slot);
  std::byte* result = half_page_apart(slot, out);
  if (mine > 0) reduce_sources_f32(out + offset, result + offset, sources_.data(), n, mine, type_, op_, scale_);
  seg_.flags(me).reduced_at.store(static_cast<uint32_t>(result - slot), std::memory_order_relaxed);
  seg_.flags(me).reduced.store(c.number, std::memory_order_release);
  // Bytes that crossed between processes, as the ring would count them: the peers read
  // our shard of their input and our reduced shard, we read theirs.
  const uint64_t moved = (c.len - mine) * es_ + static_cast<uint64_t>(n - 1) * mine * es_;
  count_moved(moved, moved);
}

void ShmAllReduce::gather(const Chunk& c) {
  const int n = ranks(), me = rank();
  auto* out = static_cast<std::byte*>(out_) + c.first * es_;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const size_t len = shard_count(c.len, n, r), offset = shard_offset(c.len, n, r) * es_;
    const std::byte* result = seg_.result(r, c.slot) + seg_.flags(r).reduced_at.load(std::memory_order_relaxed);
    if (len > 0) std::memcpy(out + offset, result + offset, len * es_);
  }
}

bool ShmAllReduce::advance() {
  if (!seg_.serving(ticket_)) return false;  // an earlier all-reduce still uses the segments
  for (;;) {
    switch (phase_) {
      case Phase::stage_first:
        current_ = stage(0);
        phase_ = Phase::reduce;
        [[fallthrough]];
      case Phase::reduce:
        if (!peers_reached(false, current_.number)) return false;
        reduce(current_);
        // Stage the next chunk now: the peers may still be reducing this one, and our
        // copy-in overlaps their work instead of waiting for it.
        has_next_ = current_.first + current_.len < count_;
        if (has_next_) next_ = stage(current_.first + current_.len);
        phase_ = Phase::gather;
        [[fallthrough]];
      case Phase::gather:
        if (!peers_reached(true, current_.number)) return false;
        gather(current_);
        if (!has_next_) {
          seg_.next_ticket_served();
          return true;
        }
        current_ = next_;
        phase_ = Phase::reduce;
        break;
    }
  }
}

}  // namespace dseek::comm
