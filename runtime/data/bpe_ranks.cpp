// Parsing .tiktoken files and building the lookup tables (see bpe_ranks.hpp).
#include "runtime/data/bpe_ranks.hpp"

#include <xxhash.h>

#include <bit>
#include <charconv>
#include <utility>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding; false when `text` is not.
bool decode_base64(std::string_view text, std::string& out) {
  out.clear();
  if (text.empty() || text.size() % 4 != 0) return false;
  size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  uint32_t bits = 0;
  int count = 0;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    int v = base64_value(static_cast<unsigned char>(text[i]));
    if (v < 0) return false;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count == 4) {
      out.push_back(static_cast<char>(bits >> 16));
      out.push_back(static_cast<char>(bits >> 8));
      out.push_back(static_cast<char>(bits));
      bits = 0;
      count = 0;
    }
  }
  if (count == 3) {
    out.push_back(static_cast<char>(bits >> 10));
    out.push_back(static_cast<char>(bits >> 2));
  } else if (count == 2) {
    out.push_back(static_cast<char>(bits >> 4));
  } else if (count != 0) {
    return false;
  }
  return !out.empty();
}

size_t table_size_for(size_t entries) {
  return std::bit_ceil(entries * 2 + 16);
}

}  // namespace

BpeRanks BpeRanks::parse(std::string_view contents, const std::string& where) {
  std::vector<std::pair<uint32_t, std::string>> tokens;  // by line
  std::string bytes;
  size_t line_number = 0;
  uint32_t max_rank = 0;
  for (size_t pos = 0; pos < contents.size();) {
    size_t end = contents.find('\n', pos);
    if (end == std::string_view::npos) end = contents.size();
    std::string_view line = contents.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    uint32_t rank = 0;
    const char* rank_end = line.data() + line.size();
    bool ok = space != std::string_view::npos && decode_base64(line.substr(0, space), bytes);
    if (ok) {
      auto [stop, error] = std::from_chars(line.data() + space + 1, rank_end, rank);
      ok = error == std::errc() && stop == rank_end && rank < kNone - 1;
    }
    if (!ok) {
      throw DataError("malformed rank file " + where + ": line " + std::to_string(line_number) +
                      " is not 'base64 rank'");
    }
    max_rank = std::max(max_rank, rank);
    tokens.emplace_back(rank, bytes);
  }
  if (tokens.empty()) throw DataError("rank file " + where + " holds no tokens");
  if (max_rank + 1 != tokens.size()) {
    throw DataError("malformed rank file " + where + ": " + std::to_string(tokens.size()) +
                    " tokens with ranks up to " + std::to_string(max_rank) +
                    " (the ranks must be 0 .. n-1, each once)");
  }
  std::vector<const std::string*> by_rank(tokens.size(), nullptr);
  for (const auto& [rank, token] : tokens) {
    if (by_rank[rank] != nullptr) {
      throw DataError("malformed rank file " + where + ": rank " + std::to_string(rank) +
                      " appears twice");
    }
    by_rank[rank] = &token;
  }
  BpeRanks ranks;
  ranks.offsets_.reserve(tokens.size() + 1);
  ranks.offsets_.push_back(0);
  for (const std::string* token : by_rank) {
    ranks.arena_ += *token;
    ranks.offsets_.push_back(static_cast<uint32_t>(ranks.arena_.size()));
  }
  ranks.build_tables(where);
  return ranks;
}

uint32_t BpeRanks::rank_of(std::string_view bytes) const {
  for (size_t slot = XXH3_64bits(bytes.data(), bytes.size()) & byte_mask_;;
       slot = (slot + 1) & byte_mask_) {
    const uint32_t rank = byte_table_[slot];
    if (rank == kNone || bytes_of(rank) == bytes) return rank;
  }
}

void BpeRanks::build_tables(const std::string& where) {
  const uint32_t n = size();
  byte_table_.assign(table_size_for(n), kNone);
  byte_mask_ = byte_table_.size() - 1;
  for (uint32_t rank = 0; rank < n; ++rank) {
    const std::string_view bytes = bytes_of(rank);
    size_t slot = XXH3_64bits(bytes.data(), bytes.size()) & byte_mask_;
    while (byte_table_[slot] != kNone) {
      if (bytes_of(byte_table_[slot]) == bytes) {
        throw DataError("malformed rank file " + where + ": ranks " +
                        std::to_string(byte_table_[slot]) + " and " + std::to_string(rank) +
                        " have the same bytes");
      }
      slot = (slot + 1) & byte_mask_;
    }
    byte_table_[slot] = rank;
  }
  for (unsigned b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    byte_ranks_[b] = rank_of(std::string_view(&byte, 1));
    if (byte_ranks_[b] == kNone) {
      throw DataError("malformed rank file " + where + ": byte " + std::to_string(b) +
                      " has no token (every byte needs one)");
    }
  }
  // Every way to cut a token in two tokens is a merge into it; the merge loop only
  // ever asks about adjacent tokens, so this is the whole of tiktoken's rank lookup.
  std::vector<std::pair<uint64_t, uint32_t>> pairs;
  for (uint32_t rank = 0; rank < n; ++rank) {
    const std::string_view bytes = bytes_of(rank);
    for (size_t cut = 1; cut < bytes.size(); ++cut) {
      const uint32_t left = rank_of(bytes.substr(0, cut));
      if (left == kNone) continue;
      const uint32_t right = rank_of(bytes.substr(cut));
      if (right != kNone) pairs.emplace_back((uint64_t{left} << 32) | right, rank);
    }
  }
  const size_t size = table_size_for(pairs.size());
  pair_keys_.assign(size, kEmptyPair);
  pair_ranks_.assign(size, kNone);
  pair_mask_ = size - 1;
  pair_shift_ = 64 - static_cast<unsigned>(std::countr_zero(size));
  for (const auto& [key, rank] : pairs) {
    size_t slot = pair_slot(key);
    while (pair_keys_[slot] != kEmptyPair) slot = (slot + 1) & pair_mask_;
    pair_keys_[slot] = key;
    pair_ranks_[slot] = rank;
  }
}

}  // namespace dseek::data
