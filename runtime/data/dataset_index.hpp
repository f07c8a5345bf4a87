// The index of a prepared data set (index.capnp, schema in schemas/shard_index.capnp)
// as plain C++ values, so that only dataset_index.cpp depends on Cap'n Proto.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

inline constexpr const char* kIndexFileName = "index.capnp";
// Format 2 added the tokenizer's hash, 32-bit tokens and skipped records; format 1
// indexes (bytes, uint16) still read.
inline constexpr uint32_t kIndexFormatVersion = 2;

// How shards store tokens: 16 bits when the vocabulary fits, else 32 (little-endian).
enum class TokenDtype { uint16_le, uint32_le };
inline constexpr uint32_t token_bytes(TokenDtype dtype) {
  return dtype == TokenDtype::uint16_le ? 2 : 4;
}
inline constexpr TokenDtype dtype_for_vocab(uint32_t vocab_size) {
  return vocab_size <= 65536 ? TokenDtype::uint16_le : TokenDtype::uint32_le;
}

struct ShardEntry {
  std::string file_name;  // plain name inside the data set directory
  uint64_t tokens = 0;
  uint64_t bytes = 0;     // file size, header included
  uint64_t xxhash64 = 0;  // of the whole file
};

struct SplitEntry {
  uint64_t documents = 0;
  uint64_t tokens = 0;
  std::vector<ShardEntry> shards;
};

struct DatasetIndex {
  uint32_t format_version = kIndexFormatVersion;
  std::string tokenizer;         // canonical name: bytes, r50k_base, cl100k_base
  std::string tokenizer_sha256;  // of its rank file; "" for bytes
  uint32_t vocab_size = 0;
  TokenDtype token_dtype = TokenDtype::uint16_le;
  uint32_t separator_token = 0;
  std::string source_dir;
  uint64_t input_bytes = 0;
  uint64_t skipped_files = 0;
  uint64_t skipped_records = 0;
  double val_fraction = 0;
  SplitEntry train;
  SplitEntry validation;

  const SplitEntry& split(Split which) const {
    return which == Split::train ? train : validation;
  }
};

// Reads and validates dir/index.capnp; throws DataError naming it when it is missing,
// malformed, of another format version, or inconsistent with itself.
DatasetIndex read_dataset_index(const std::filesystem::path& dir);
// Writes dir/index.capnp atomically (temp file, fsync, rename, directory fsync).
void write_dataset_index(const std::filesystem::path& dir, const DatasetIndex& index);

}  // namespace dseek::data
