// Reading and writing index.capnp (see dataset_index.hpp). The only file of the data
// module that sees Cap'n Proto, which keeps its headers out of everything else.
#include "runtime/data/dataset_index.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

#include <utility>
#include <cstring>
#include <system_error>

#include "runtime/data/byte_tokenizer.hpp"
#include "runtime/data/fim.hpp"
#include "runtime/data/file_io.hpp"
#include "runtime/data/shard_file.hpp"
#include "runtime/data/tokenizer.hpp"
#include "schemas/shard_index.capnp.h"

namespace dseek::data {
namespace {

// A data set index is small (one entry per shard): anything bigger is not one.
constexpr size_t kMaxIndexBytes = 64u << 20;

void write_split(schema::SplitIndex::Builder out, const SplitEntry& split) {
  out.setDocuments(split.documents);
  out.setTokens(split.tokens);
  auto shards = out.initShards(static_cast<unsigned>(split.shards.size()));
  for (size_t i = 0; i < split.shards.size(); ++i) {
    const ShardEntry& shard = split.shards[i];
    auto entry = shards[static_cast<unsigned>(i)];
    entry.setFileName(shard.file_name);
    entry.setTokens(shard.tokens);
    entry.setBytes(shard.bytes);
    entry.setXxhash64(shard.xxhash64);
  }
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

SplitEntry read_split(schema::SplitIndex::Reader in, const std::string& where,
                      const char* split_name, TokenDtype dtype) {
  auto bad = [&](const std::string& why) {
    return DataError("malformed data set index " + where + ": " + split_name + " " + why);
  };
  SplitEntry split;
  split.documents = in.getDocuments();
  split.tokens = in.getTokens();
  uint64_t sum = 0;
  for (auto entry : in.getShards()) {
    ShardEntry shard;
    shard.file_name = entry.getFileName().cStr();
    shard.tokens = entry.getTokens();
    shard.bytes = entry.getBytes();
    shard.xxhash64 = entry.getXxhash64();
    if (!is_plain_file_name(shard.file_name)) {
      throw bad("shard name '" + shard.file_name + "' is not a plain file name");
    }
    if (shard.tokens > (UINT64_MAX - kShardHeaderBytes) / token_bytes(dtype) ||
        shard.bytes != shard_file_bytes(shard.tokens, dtype)) {
      throw bad("shard " + shard.file_name + " has " + std::to_string(shard.bytes) +
                " bytes for " + std::to_string(shard.tokens) + " tokens");
    }
    if (sum + shard.tokens < sum) throw bad("token counts overflow");
    sum += shard.tokens;
    split.shards.push_back(std::move(shard));
  }
  if (sum != split.tokens) {
    throw bad("shards hold " + std::to_string(sum) + " tokens, the split says " +
              std::to_string(split.tokens));
  }
  return split;
}

DatasetIndex parse_index(kj::ArrayPtr<const capnp::word> words, const std::string& where) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() * 2 + 1024;
  capnp::FlatArrayMessageReader message(words, options);
  auto in = message.getRoot<schema::ShardIndex>();

  DatasetIndex index;
  index.format_version = in.getFormatVersion();
  if (index.format_version != 1 && index.format_version != kIndexFormatVersion) {
    throw DataError("data set index " + where + " has format version " +
                    std::to_string(index.format_version) + ", this build reads versions 1 and " +
                    std::to_string(kIndexFormatVersion));
  }
  index.tokenizer = in.getTokenizer().cStr();
  if (index.tokenizer.empty()) index.tokenizer = byte_tokenizer::kName;
  index.tokenizer_sha256 = in.getTokenizerSha256().cStr();
  index.vocab_size = in.getVocabSize();
  index.separator_token = in.getSeparatorToken();
  const auto kind = parse_tokenizer_name(index.tokenizer);
  // A SentencePiece model's vocabulary is its own (any size).
  const uint32_t expected_vocab = kind ? tokenizer_vocab_size(*kind) : 0;
  // With fill-in-the-middle, three sentinel ids may follow the vocabulary (fim.hpp).
  const bool known_vocab = index.vocab_size == expected_vocab ||
                           index.vocab_size == expected_vocab + kFimSentinelIds;
  if (!kind || (expected_vocab != 0 && !known_vocab) ||
      index.vocab_size == 0 ||
      (index.format_version == 1 && *kind != TokenizerKind::bytes)) {
    throw DataError("data set index " + where + " uses tokenizer '" + index.tokenizer +
                    "' with vocabulary " + std::to_string(index.vocab_size) +
                    "; this build reads bytes (256), r50k_base (50257), cl100k_base (100277) "
                    "(each + 3 with fill-in-the-middle sentinels) "
                    "and sentencepiece");
  }
  if (index.separator_token >= index.vocab_size) {
    throw DataError("malformed data set index " + where + ": separator token " +
                    std::to_string(index.separator_token) + " is outside the vocabulary");
  }
  switch (in.getTokenDtype()) {
    case schema::TokenDtype::UINT16_LE: index.token_dtype = TokenDtype::uint16_le; break;
    case schema::TokenDtype::UINT32_LE: index.token_dtype = TokenDtype::uint32_le; break;
    default: throw DataError("malformed data set index " + where + ": unknown token dtype");
  }
  if (index.token_dtype == TokenDtype::uint16_le && index.vocab_size > 65536) {
    throw DataError("malformed data set index " + where + ": uint16 tokens for a vocabulary of " +
                    std::to_string(index.vocab_size));
  }
  index.source_dir = in.getSourceDir().cStr();
  index.input_bytes = in.getInputBytes();
  index.skipped_files = in.getSkippedFiles();
  index.skipped_records = in.getSkippedRecords();
  index.val_fraction = in.getValFraction();
  index.train = read_split(in.getTrain(), where, "train", index.token_dtype);
  index.validation = read_split(in.getValidation(), where, "validation", index.token_dtype);
  return index;
}

}  // namespace

DatasetIndex read_dataset_index(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kIndexFileName;
  const std::string where = path.string();
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw DataError("missing data set index " + where +
                    " (not a prepared data set, or its preparation did not finish)");
  }
  std::vector<char> bytes;
  std::string why;
  if (!io::read_file(path, bytes, why)) throw DataError("cannot read data set index " + why);
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0 || bytes.size() > kMaxIndexBytes) {
    throw DataError("malformed data set index " + where + ": " + std::to_string(bytes.size()) +
                    " bytes is not a Cap'n Proto message");
  }
  // Cap'n Proto reads from word-aligned memory.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    return parse_index(words.asPtr(), where);
  } catch (const kj::Exception& exception) {
    throw DataError("malformed data set index " + where + ": " +
                    exception.getDescription().cStr());
  }
}

void write_dataset_index(const std::filesystem::path& dir, const DatasetIndex& index) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::ShardIndex>();
  out.setFormatVersion(index.format_version);
  out.setTokenizer(index.tokenizer);
  out.setVocabSize(index.vocab_size);
  out.setTokenizerSha256(index.tokenizer_sha256);
  out.setTokenDtype(index.token_dtype == TokenDtype::uint16_le ? schema::TokenDtype::UINT16_LE
                                                               : schema::TokenDtype::UINT32_LE);
  out.setSeparatorToken(index.separator_token);
  out.setSourceDir(index.source_dir);
  out.setInputBytes(index.input_bytes);
  out.setSkippedFiles(index.skipped_files);
  out.setSkippedRecords(index.skipped_records);
  out.setValFraction(index.val_fraction);
  write_split(out.initTrain(), index.train);
  write_split(out.initValidation(), index.validation);

  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  const std::filesystem::path temp = dir / (std::string(".") + kIndexFileName + ".tmp");
  io::OutputFile file(temp);
  file.write(bytes.begin(), bytes.size());
  file.sync_and_close();
  io::rename_file(temp, dir / kIndexFileName);
  io::sync_directory(dir);
}

}  // namespace dseek::data
