// How a 64-bit UCX tag names one message: which group (context), which sender (tag
// matching has no source filter), collective or point-to-point, which operation
// (sequence number) and which piece of it. Receives match all 64 bits exactly. On the
// wire the UCX transport masks every tag with its world's data-plane key (ucx_transport.hpp).
//   bits 63..40 context (24)     39..26 sender world rank (14)   25 point-to-point flag
//   bits 24..12 sequence (13)    11..0  piece within the operation (12)
// Sequence numbers and pieces wrap. That is safe because UCX matches equal tags from one
// sender in send order, and both sides use each tag in the same order: fewer than 2^13
// operations of one group may be in flight, and a collective keeps the pieces it has in
// flight at once distinct (kMaxPieces).
#pragma once

#include <cstdint>

namespace dseek::comm {

inline constexpr int kMaxWorldRanks = 1 << 14;
inline constexpr uint32_t kContextMask = (1u << 24) - 1;
inline constexpr uint32_t kMaxPieces = 1u << 12;

inline uint64_t make_tag(uint32_t context, int sender, bool point_to_point, uint32_t seq, uint32_t piece) {
  return (uint64_t{context & kContextMask} << 40) | (uint64_t(static_cast<uint32_t>(sender) & 0x3fffu) << 26) |
         (uint64_t{point_to_point ? 1u : 0u} << 25) | (uint64_t{seq & 0x1fffu} << 12) |
         uint64_t{piece & (kMaxPieces - 1)};
}

// The fields make_tag packed, read back.
inline uint32_t tag_context(uint64_t tag) { return static_cast<uint32_t>(tag >> 40) & kContextMask; }
inline int tag_sender(uint64_t tag) { return static_cast<int>((tag >> 26) & 0x3fffu); }

// The context of a group derived from its parent's: a hash of (parent, purpose, index),
// the same on every member without any message.
inline uint32_t derive_context(uint32_t parent, uint32_t purpose, uint32_t index) {
  uint64_t x = (uint64_t{parent} << 32) ^ (uint64_t{purpose} << 24) ^ index;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  const uint32_t c = static_cast<uint32_t>(x) & kContextMask;
  return c == 0 ? 1 : c;
}

}  // namespace dseek::comm
