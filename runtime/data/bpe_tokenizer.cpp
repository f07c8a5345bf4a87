// The BPE merge loop (see bpe_tokenizer.hpp): tiktoken's for short pieces, and for
// long ones the same merges found with a heap of (rank, position) and a linked list.
#include "runtime/data/bpe_tokenizer.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>

namespace dseek::data {
namespace {

// Repeatedly merges the adjacent pair whose merge has the lowest rank, the leftmost of
// equal ranks: a heap holds (rank, left part) of every current pair with a merge, plus
// stale entries, which are recognised on pop (the pair's merge is no longer that rank).
void merge_with_heap(const BpeRanks& ranks, std::string_view piece, std::vector<uint32_t>& out) {
  const size_t n = piece.size();
  constexpr size_t kEnd = SIZE_MAX;
  std::vector<uint32_t> token(n);
  std::vector<size_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    token[i] = ranks.byte_rank(static_cast<unsigned char>(piece[i]));
    next[i] = i + 1 < n ? i + 1 : kEnd;
    prev[i] = i > 0 ? i - 1 : kEnd;
  }
  using Entry = std::pair<uint32_t, size_t>;  // (rank, left part's first byte)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](size_t left) {
    if (left == kEnd || next[left] == kEnd) return;
    const uint32_t rank = ranks.merged(token[left], token[next[left]]);
    if (rank != BpeRanks::kNone) heap.emplace(rank, left);
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const auto [rank, left] = heap.top();
    heap.pop();
    if (!alive[left] || next[left] == kEnd ||
        ranks.merged(token[left], token[next[left]]) != rank) {
      continue;  // stale
    }
    const size_t right = next[left];
    token[left] = rank;  // a merged token's id is its rank
    alive[right] = false;
    next[left] = next[right];
    if (next[right] != kEnd) prev[next[right]] = left;
    push(prev[left]);
    push(left);
  }
  for (size_t i = 0; i != kEnd; i = next[i]) out.push_back(token[i]);
}

}  // namespace

void encode_piece(const BpeRanks& ranks, std::string_view piece, std::vector<uint32_t>& out,
                  size_t heap_above) {
  if (piece.size() == 1) {
    out.push_back(ranks.byte_rank(static_cast<unsigned char>(piece[0])));
    return;
  }
  if (const uint32_t whole = ranks.rank_of(piece); whole != BpeRanks::kNone) {
    out.push_back(whole);
    return;
  }
  if (piece.size() > heap_above) {
    merge_with_heap(ranks, piece, out);
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
