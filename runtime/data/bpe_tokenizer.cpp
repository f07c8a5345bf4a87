// The BPE merge loop (see bpe_tokenizer.hpp).
#include "runtime/data/bpe_tokenizer.hpp"

namespace dseek::data {

void encode_piece(const BpeRanks& ranks, std::string_view piece, std::vector<uint32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(ranks.byte_rank(static_cast<unsigned char>(piece[0])));
    return;
  }
  if (const uint32_t whole = ranks.rank_of(piece); whole != BpeRanks::kNone) {
    out.push_back(whole);
    return;
  }
  // tokens[i] is part i; merges[i] the rank its merge with part i+1 gives (kNone: none).
  thread_local std::vector<uint32_t> tokens, merges;
  const size_t n = piece.size();
  tokens.resize(n);
  merges.resize(n - 1);
  for (size_t i = 0; i < n; ++i) tokens[i] = ranks.byte_rank(static_cast<unsigned char>(piece[i]));
  for (size_t i = 0; i + 1 < n; ++i) merges[i] = ranks.merged(tokens[i], tokens[i + 1]);
  size_t parts = n;
  while (parts > 1) {
    size_t best = 0;
    uint32_t best_rank = merges[0];
    for (size_t i = 1; i + 1 < parts; ++i) {
      if (merges[i] < best_rank) {
        best_rank = merges[i];
        best = i;
      }
    }
    if (best_rank == BpeRanks::kNone) break;
    // A merged token's id is its rank.
    tokens[best] = best_rank;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    merges.erase(merges.begin() + static_cast<std::ptrdiff_t>(best));
    --parts;
    if (best > 0) merges[best - 1] = ranks.merged(tokens[best - 1], tokens[best]);
    if (best + 1 < parts) merges[best] = ranks.merged(tokens[best], tokens[best + 1]);
  }
  out.insert(out.end(), tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(parts));
}

void encode_bpe(const BpeRanks& ranks, PreTokenizer pre, std::string_view text,
                std::vector<uint32_t>& out) {
  for_each_piece(pre, text, [&](std::string_view piece) { encode_piece(ranks, piece, out); });
}

}  // namespace dseek::data
