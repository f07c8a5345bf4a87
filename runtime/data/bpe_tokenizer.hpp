// A tiktoken BPE encoding (see tokenizer.hpp): pre-tokenize, then per piece the rank
// of the whole piece when it is a token, else the merge loop of tiktoken (merge the
// adjacent pair whose merged token has the lowest rank, leftmost first, until none is a
// token).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/data/bpe_ranks.hpp"
#include "runtime/data/pretokenizer.hpp"

namespace dseek::data {

// Pieces longer than this merge through a heap (O(n log n)) rather than tiktoken's
// linear scan per merge (O(n^2)): the same merges in the same order, so the same ids,
// and a piece of a million spaces does not stall a data preparation.
inline constexpr size_t kHeapMergeBytes = 256;

// Appends the tokens of one piece (`heap_above`: for tests of both merge paths).
void encode_piece(const BpeRanks& ranks, std::string_view piece, std::vector<uint32_t>& out,
                  size_t heap_above = kHeapMergeBytes);

// Appends the tokens of valid UTF-8 `text`.
void encode_bpe(const BpeRanks& ranks, PreTokenizer pre, std::string_view text,
                std::vector<uint32_t>& out);

}  // namespace dseek::data
