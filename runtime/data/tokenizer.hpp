// The tokenizers of prepared data sets: bytes (one token per byte value), the BPE
// encodings of tiktoken, r50k_base (GPT-2's, alias gpt2) and cl100k_base, with the ids
// tiktoken gives (text is encoded as ordinary text: "<|endoftext|>" in a document is
// not the special token), and SentencePiece models. A tokenizer is named, or given as a
// .tiktoken rank file whose SHA-256 is one of the known encodings', or as a
// SentencePiece .model file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dseek::data {

enum class TokenizerKind { bytes, r50k_base, cl100k_base, sentencepiece };

// "bytes", "gpt2" or "r50k_base", "cl100k_base", "sentencepiece" (the name an index
// records; a model is opened by its file); nullopt for anything else.
std::optional<TokenizerKind> parse_tokenizer_name(std::string_view name);
// The canonical name: "bytes", "r50k_base", "cl100k_base", "sentencepiece".
const char* tokenizer_name(TokenizerKind kind);
// 256, 50257, 100277: one more than the largest id; 0 for sentencepiece (the model's).
uint32_t tokenizer_vocab_size(TokenizerKind kind);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual TokenizerKind kind() const = 0;
  const char* name() const { return tokenizer_name(kind()); }
  // Lowercase hex SHA-256 of the rank file ("" for bytes) and its path.
  virtual std::string files_sha256() const = 0;
  virtual std::filesystem::path file() const = 0;
  // Ids are below vocab_size(); separator() goes between the documents of a data set
  // (the NUL byte for bytes, <|endoftext|> for the BPE encodings).
  virtual uint32_t vocab_size() const = 0;
  virtual uint32_t separator() const = 0;
  // Appends the ids of `text` to `out`; the BPE encodings repair invalid UTF-8 first.
  virtual void encode(std::string_view text, std::vector<uint32_t>& out) const = 0;
  // Appends the bytes of `ids` to `out` (special ids as their text); throws DataError
  // on an id that is not in the vocabulary.
  virtual void decode(std::span<const uint32_t> ids, std::string& out) const = 0;
};

// The folder of the installed rank files: $DSEEK_TOKENIZER_DIR, else
// $XDG_CACHE_HOME/dseek/tokenizers, else $HOME/.cache/dseek/tokenizers.
std::filesystem::path tokenizer_dir();

// Opens a tokenizer by name, by the path of a SentencePiece model (ending in .model),
// or by the path of a .tiktoken file (anything else with a '/' or ending in .tiktoken);
// throws DataError naming the file when it is missing, its SHA-256 is not the expected
// one, or it is malformed.
std::unique_ptr<Tokenizer> open_tokenizer(std::string_view name_or_file);

}  // namespace dseek::data
