// The tokenizer files of a Hugging Face GPT-2 folder (transformers' GPT2Tokenizer and
// GPT2TokenizerFast read them), written from the r50k_base rank file dseek encodes with:
//   vocab.json               token -> id, each token's bytes in GPT-2's byte-to-unicode
//                            alphabet (bytes_to_unicode of OpenAI's encoder.py), plus
//                            <|endoftext|> (50256)
//   merges.txt               "#version: 0.2", then one "left right" line per merge in rank
//                            order: merge i makes token 256 + i. A tiktoken file lists
//                            tokens, not merges; token r's merge is what BPE over its own
//                            bytes with the ranks below r ends in (two parts, always, for
//                            GPT-2's ranks: anything else is an error naming the token)
//   tokenizer_config.json    GPT2Tokenizer, <|endoftext|> as bos/eos/unk, no prefix space
//   special_tokens_map.json
// Only GPT-2's encoding has these files: for any other tokenizer the folder gets
// TOKENIZER-NOT-INCLUDED.txt saying which tokenizer the model needs and why it is not there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/bpe_ranks.hpp"
#include "runtime/data/tokenizer.hpp"

namespace dseek::exporting {

struct FolderFile {
  std::string name;      // in the exported folder
  std::string contents;
};

// The four files above from r50k_base's ranks (`context`: model_max_length).
std::vector<FolderFile> gpt2_tokenizer_files(const data::BpeRanks& ranks, int64_t context);

struct HfTokenizerFiles {
  std::vector<FolderFile> files;  // the GPT-2 files, or the note
  std::string note;               // "" when the GPT-2 files are there; else what to tell the user
};

// The files for the checkpoint's tokenizer: `tokenizer` is null when it could not be
// opened (`why` says why). Reads r50k_base's rank file again (tokenizer->file()).
HfTokenizerFiles hf_tokenizer_files(const data::Tokenizer* tokenizer, const std::string& why,
                                    int64_t context);

}  // namespace dseek::exporting
