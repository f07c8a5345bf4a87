// The SentencePiece tokenizer (see sentencepiece_tokenizer.hpp). Input is repaired to
// valid UTF-8 first, as for the BPE encodings.
#include "runtime/data/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <string>
#include <vector>

#include "runtime/data/file_io.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/utf8_repair.hpp"
#include "runtime/util/sha256.hpp"

namespace dseek::data {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::filesystem::path file, std::string sha256)
      : file_(std::move(file)), sha256_(std::move(sha256)) {
    const auto status = processor_.Load(file_.string());
    if (!status.ok()) {
      throw DataError("cannot load SentencePiece model " + file_.string() + ": " +
                      status.ToString());
    }
    if (processor_.eos_id() < 0) {
      throw DataError("SentencePiece model " + file_.string() +
                      " has no </s> (eos) piece to separate documents with");
    }
  }
  TokenizerKind kind() const override { return TokenizerKind::sentencepiece; }
  std::string files_sha256() const override { return sha256_; }
  std::filesystem::path file() const override { return file_; }
  uint32_t vocab_size() const override {
    return static_cast<uint32_t>(processor_.GetPieceSize());
  }
  uint32_t separator() const override { return static_cast<uint32_t>(processor_.eos_id()); }
  void encode(std::string_view text, std::vector<uint32_t>& out) const override {
    thread_local std::string repaired;
    if (!utf8::is_valid(text)) {
      utf8::repair(text, repaired);
      text = repaired;
    }
    std::vector<int> ids;
    const auto status = processor_.Encode(text, &ids);
    if (!status.ok()) {
      throw DataError("SentencePiece model " + file_.string() + " failed to encode: " +
                      status.ToString());
    }
    out.insert(out.end(), ids.begin(), ids.end());
  }
  void decode(std::span<const uint32_t> ids, std::string& out) const override {
    std::vector<int> values;
    for (uint32_t id : ids) {
      if (id >= vocab_size()) {
        throw DataError("token " + std::to_string(id) + " is not in the vocabulary of " +
                        file_.string() + " (" + std::to_string(vocab_size()) + ")");
      }
      values.push_back(static_cast<int>(id));
    }
    std::string text;
    const auto status = processor_.Decode(values, &text);
    if (!status.ok()) {
      throw DataError("SentencePiece model " + file_.string() + " failed to decode: " +
                      status.ToString());
    }
    out += text;
  }

 private:
  std::filesystem::path file_;
  std::string sha256_;
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

std::unique_ptr<Tokenizer> open_sentencepiece(const std::filesystem::path& model) {
  std::vector<char> bytes;
  std::string why;
  std::error_code error;
  if (!std::filesystem::exists(model, error)) {
    throw DataError("missing SentencePiece model " + model.string());
  }
  if (!io::read_file(model, bytes, why)) throw DataError("cannot read SentencePiece model " + why);
  return std::make_unique<SentencePieceTokenizer>(model,
                                                  util::sha256_hex(bytes.data(), bytes.size()));
}

}  // namespace dseek::data
