// Fill-in-the-middle (Bavarian et al. 2022, "Efficient Training of Language Models to
// Fill in the Middle"), the augment stage: a document chosen at `rate` is cut at two
// uniform random points of its tokens into prefix, middle and suffix, and rearranged
//   PSM: <PRE> prefix <SUF> suffix <MID> middle
//   SPM: <PRE> <SUF> suffix <MID> prefix middle      (the paper's SPM variant)
// SPM for a share `spm_rate` of the chosen documents. The choices are a pure function
// of (seed, the document's key hash): the same for any number of workers. The cut is
// on tokens (not characters, as the paper does before tokenizing): the pieces' tokens
// are the document's own.
#pragma once

#include <cstdint>
#include <vector>

namespace dseek::data {

class Tokenizer;

struct FimSettings {
  double rate = 0.0;      // share of the documents rearranged; 0: off
  double spm_rate = 0.5;  // of those, the share in SPM order
  uint64_t seed = 0;
};

// Sentinel ids a data set adds after its tokenizer's vocabulary (not cl100k_base).
inline constexpr uint32_t kFimSentinelIds = 3;

struct FimTokens {
  uint32_t prefix = 0, middle = 0, suffix = 0;
};

// The sentinels: cl100k_base's own <|fim_prefix|>, <|fim_middle|>, <|fim_suffix|>
// (100258-100260); for the other tokenizers three ids after their vocabulary
// (vocab, vocab + 1, vocab + 2), which the data set's vocabulary then includes.
FimTokens fim_tokens_for(const Tokenizer& tokenizer);
// The data set's vocabulary: the tokenizer's, or past the sentinels when FIM is on.
uint32_t dataset_vocab(const Tokenizer& tokenizer, const FimSettings& settings);

// Rearranges `tokens` when the document is chosen; true if it was. Throws DataError on
// a rate outside [0, 1].
bool apply_fim(std::vector<uint32_t>& tokens, uint64_t key_hash, const FimSettings& settings,
               const FimTokens& sentinels);

void check_fim_settings(const FimSettings& settings);

}  // namespace dseek::data
