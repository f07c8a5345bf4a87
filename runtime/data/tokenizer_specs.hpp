// What dseek knows of each BPE encoding: its rank file and that file's SHA-256 (the
// hashes tiktoken pins for OpenAI's files, which scripts/install-tokenizers.sh
// reproduces byte for byte from js-tiktoken's package), its pre-tokenizer and its
// special tokens.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "runtime/data/pretokenizer.hpp"
#include "runtime/data/tokenizer.hpp"

namespace dseek::data {

struct SpecialToken {
  std::string_view text;
  uint32_t id;
};

struct EncodingSpec {
  TokenizerKind kind;
  std::string_view file_name;  // in tokenizer_dir()
  std::string_view sha256;
  PreTokenizer pre_tokenizer;
  uint32_t mergeable;          // ranks 0 .. mergeable-1 in the file
  std::span<const SpecialToken> specials;
  uint32_t vocab_size;         // 1 + the largest id
  uint32_t end_of_text;
};

inline constexpr SpecialToken kR50kSpecials[] = {{"<|endoftext|>", 50256}};
inline constexpr SpecialToken kCl100kSpecials[] = {{"<|endoftext|>", 100257},
                                                    {"<|fim_prefix|>", 100258},
                                                    {"<|fim_middle|>", 100259},
                                                    {"<|fim_suffix|>", 100260},
                                                    {"<|endofprompt|>", 100276}};

inline constexpr EncodingSpec kEncodings[] = {
    {TokenizerKind::r50k_base, "r50k_base.tiktoken",
     "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930", PreTokenizer::r50k,
     50256, kR50kSpecials, 50257, 50256},
    {TokenizerKind::cl100k_base, "cl100k_base.tiktoken",
     "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", PreTokenizer::cl100k,
     100256, kCl100kSpecials, 100277, 100257},
};

}  // namespace dseek::data
