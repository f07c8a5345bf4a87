// The pre-tokenizers of tiktoken's encodings: the pieces their regexes cut text into
// before BPE, written as hand-made matchers (std::regex has no \p{..}) that follow the
// regex's alternatives, greediness and backtracking exactly.
//   r50k_base (GPT-2): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   cl100k_base: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//                 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (The case-insensitive contractions are ASCII only, as js-tiktoken spells them out.)
#pragma once

#include <cstddef>
#include <string_view>

namespace dseek::data {

enum class PreTokenizer { r50k, cl100k };

// The end (byte offset) of the piece that starts at byte `start` of valid UTF-8 `text`
// (start < text.size()).
size_t piece_end(PreTokenizer kind, std::string_view text, size_t start);

// Calls on_piece(std::string_view) for each piece of valid UTF-8 `text`, in order.
template <typename OnPiece>
void for_each_piece(PreTokenizer kind, std::string_view text, OnPiece&& on_piece) {
  for (size_t start = 0; start < text.size();) {
    const size_t end = piece_end(kind, text, start);
    on_piece(text.substr(start, end - start));
    start = end;
  }
}

}  // namespace dseek::data
