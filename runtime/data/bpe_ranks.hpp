// The mergeable ranks of a tiktoken encoding, from a .tiktoken file (one "base64 rank"
// line per token, the format OpenAI publishes and scripts/install-tokenizers.sh writes
// from js-tiktoken's package), in the two tables the BPE merge loop needs: a token's
// rank by its bytes, and the rank of the token that two adjacent tokens merge into.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dseek::data {

class BpeRanks {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Parses a .tiktoken file's contents; throws DataError naming `where` when malformed
  // (a bad line, a rank or token twice, a byte value without a token).
  static BpeRanks parse(std::string_view contents, const std::string& where);

  uint32_t size() const { return static_cast<uint32_t>(offsets_.size() - 1); }
  std::string_view bytes_of(uint32_t rank) const {
    return std::string_view(arena_).substr(offsets_[rank], offsets_[rank + 1] - offsets_[rank]);
  }
  uint32_t byte_rank(unsigned char byte) const { return byte_ranks_[byte]; }
  // The rank of the token with exactly these bytes, or kNone.
  uint32_t rank_of(std::string_view bytes) const;
  // The rank of the token whose bytes are those of `left` then `right`, or kNone.
  uint32_t merged(uint32_t left, uint32_t right) const {
    const uint64_t key = (uint64_t{left} << 32) | right;
    for (size_t slot = pair_slot(key);; slot = (slot + 1) & pair_mask_) {
      const uint64_t found = pair_keys_[slot];
      if (found == key) return pair_ranks_[slot];
      if (found == kEmptyPair) return kNone;
    }
  }

 private:
  static constexpr uint64_t kEmptyPair = UINT64_MAX;
  size_t pair_slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> pair_shift_);
  }
  void build_tables(const std::string& where);

  std::string arena_;              // every token's bytes, by rank
  std::vector<uint32_t> offsets_;  // token r is arena_[offsets_[r], offsets_[r + 1])
  uint32_t byte_ranks_[256] = {};
  std::vector<uint32_t> byte_table_;  // open addressing: rank or kNone, by hash of bytes
  size_t byte_mask_ = 0;
  std::vector<uint64_t> pair_keys_;   // open addressing: (left << 32 | right) or kEmptyPair
  std::vector<uint32_t> pair_ranks_;
  size_t pair_mask_ = 0;
  unsigned pair_shift_ = 64;
};

}  // namespace dseek::data
