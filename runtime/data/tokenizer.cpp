// Opening tokenizers (see tokenizer.hpp): the byte tokenizer, and the BPE encodings
// from their rank files, whose SHA-256 is checked against tokenizer_specs.hpp.
#include "runtime/data/tokenizer.hpp"

#include <cstdlib>
#include <utility>

#include "runtime/data/bpe_ranks.hpp"
#include "runtime/data/bpe_tokenizer.hpp"
#include "runtime/data/byte_tokenizer.hpp"
#include "runtime/data/file_io.hpp"
#include "runtime/data/sentencepiece_tokenizer.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/tokenizer_specs.hpp"
#include "runtime/data/utf8_repair.hpp"
#include "runtime/util/sha256.hpp"

namespace dseek::data {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  TokenizerKind kind() const override { return TokenizerKind::bytes; }
  std::string files_sha256() const override { return ""; }
  std::filesystem::path file() const override { return {}; }
  uint32_t vocab_size() const override { return byte_tokenizer::kVocabSize; }
  uint32_t separator() const override { return byte_tokenizer::kSeparator; }
  void encode(std::string_view text, std::vector<uint32_t>& out) const override {
    for (char c : text) out.push_back(static_cast<unsigned char>(c));
  }
  void decode(std::span<const uint32_t> ids, std::string& out) const override {
    for (uint32_t id : ids) {
      if (id >= byte_tokenizer::kVocabSize) {
        throw DataError("token " + std::to_string(id) + " is not in the byte vocabulary (256)");
      }
      out.push_back(static_cast<char>(id));
    }
  }
};

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(const EncodingSpec& spec, BpeRanks ranks, std::string sha256,
               std::filesystem::path file)
      : spec_(spec), ranks_(std::move(ranks)), sha256_(std::move(sha256)), file_(std::move(file)) {}
  TokenizerKind kind() const override { return spec_.kind; }
  std::string files_sha256() const override { return sha256_; }
  std::filesystem::path file() const override { return file_; }
  uint32_t vocab_size() const override { return spec_.vocab_size; }
  uint32_t separator() const override { return spec_.end_of_text; }
  void encode(std::string_view text, std::vector<uint32_t>& out) const override {
    if (utf8::is_valid(text)) {
      encode_bpe(ranks_, spec_.pre_tokenizer, text, out);
      return;
    }
    thread_local std::string repaired;
    utf8::repair(text, repaired);
    encode_bpe(ranks_, spec_.pre_tokenizer, repaired, out);
  }
  void decode(std::span<const uint32_t> ids, std::string& out) const override {
    for (uint32_t id : ids) {
      if (id < ranks_.size()) {
        out.append(ranks_.bytes_of(id));
        continue;
      }
      bool found = false;
      for (const SpecialToken& special : spec_.specials) {
        if (special.id == id) {
          out.append(special.text);
          found = true;
        }
      }
      if (!found) {
        throw DataError("token " + std::to_string(id) + " is not in the vocabulary of " +
                        tokenizer_name(spec_.kind) + " (" + std::to_string(spec_.vocab_size) +
                        ")");
      }
    }
  }

 private:
  const EncodingSpec& spec_;
  BpeRanks ranks_;
  std::string sha256_;
  std::filesystem::path file_;
};

const EncodingSpec& spec_of(TokenizerKind kind) {
  for (const EncodingSpec& spec : kEncodings) {
    if (spec.kind == kind) return spec;
  }
  throw DataError(std::string("internal error: no encoding spec for ") + tokenizer_name(kind));
}

std::unique_ptr<Tokenizer> open_rank_file(const std::filesystem::path& path,
                                          const EncodingSpec* expected) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw DataError("missing rank file " + path.string() + " of tokenizer " +
                    (expected ? tokenizer_name(expected->kind) : "given as a file") +
                    " (scripts/install-tokenizers.sh installs r50k_base and cl100k_base into " +
                    tokenizer_dir().string() + ")");
  }
  std::vector<char> bytes;
  std::string why;
  if (!io::read_file(path, bytes, why)) throw DataError("cannot read rank file " + why);
  const std::string sha256 = util::sha256_hex(bytes.data(), bytes.size());
  const EncodingSpec* spec = expected;
  if (spec == nullptr) {
    for (const EncodingSpec& known : kEncodings) {
      if (known.sha256 == sha256) spec = &known;
    }
    if (spec == nullptr) {
      throw DataError("rank file " + path.string() + " has SHA-256 " + sha256 +
                      ", which is neither r50k_base's nor cl100k_base's: dseek knows the "
                      "pre-tokenizer and special tokens of those two only");
    }
  } else if (sha256 != spec->sha256) {
    throw DataError("rank file " + path.string() + " of tokenizer " + tokenizer_name(spec->kind) +
                    " has SHA-256 " + sha256 + ", expected " + std::string(spec->sha256) +
                    " (re-run scripts/install-tokenizers.sh)");
  }
  BpeRanks ranks = BpeRanks::parse(std::string_view(bytes.data(), bytes.size()), path.string());
  if (ranks.size() != spec->mergeable) {
    throw DataError("rank file " + path.string() + " has " + std::to_string(ranks.size()) +
                    " tokens, " + tokenizer_name(spec->kind) + " has " +
                    std::to_string(spec->mergeable));
  }
  return std::make_unique<BpeTokenizer>(*spec, std::move(ranks), sha256, path);
}

}  // namespace

std::optional<TokenizerKind> parse_tokenizer_name(std::string_view name) {
  if (name == "bytes") return TokenizerKind::bytes;
  if (name == "gpt2" || name == "r50k_base") return TokenizerKind::r50k_base;
  if (name == "cl100k_base") return TokenizerKind::cl100k_base;
  if (name == "sentencepiece") return TokenizerKind::sentencepiece;
  return std::nullopt;
}

const char* tokenizer_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::bytes: return "bytes";
    case TokenizerKind::r50k_base: return "r50k_base";
    case TokenizerKind::cl100k_base: return "cl100k_base";
    case TokenizerKind::sentencepiece: return "sentencepiece";
  }
  return "unknown";
}

uint32_t tokenizer_vocab_size(TokenizerKind kind) {
  if (kind == TokenizerKind::sentencepiece) return 0;
  return kind == TokenizerKind::bytes ? byte_tokenizer::kVocabSize : spec_of(kind).vocab_size;
}

std::filesystem::path tokenizer_dir() {
  if (const char* dir = std::getenv("DSEEK_TOKENIZER_DIR"); dir && *dir) return dir;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache) {
    return std::filesystem::path(cache) / "dseek" / "tokenizers";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::filesystem::path(home) / ".cache" / "dseek" / "tokenizers";
  }
  throw DataError("cannot find the tokenizer folder: set DSEEK_TOKENIZER_DIR (or HOME)");
}

std::unique_ptr<Tokenizer> open_tokenizer(std::string_view name_or_file) {
  if (auto kind = parse_tokenizer_name(name_or_file)) {
    if (*kind == TokenizerKind::bytes) return std::make_unique<ByteTokenizer>();
    if (*kind == TokenizerKind::sentencepiece) {
      throw DataError("a SentencePiece tokenizer is given by its model file (PATH.model)");
    }
    const EncodingSpec& spec = spec_of(*kind);
    return open_rank_file(tokenizer_dir() / spec.file_name, &spec);
  }
  const std::string text(name_or_file);
  if (text.ends_with(".model")) return open_sentencepiece(text);
  if (text.find('/') != std::string::npos || text.ends_with(".tiktoken")) {
    return open_rank_file(text, nullptr);
  }
  throw DataError("unknown tokenizer '" + text +
                  "': bytes, gpt2 (r50k_base), cl100k_base, the path of a .tiktoken file, or "
                  "of a SentencePiece .model file");
}

}  // namespace dseek::data
