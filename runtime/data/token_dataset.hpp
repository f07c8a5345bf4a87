// A prepared token data set (the output of `dseek data prepare`), read through mmap.
// The directory holds an index (schemas/shard_index.capnp) and shard files; each
// split (train, validation) is the concatenation of its shards' tokens in index order.
// Opening verifies every shard's size and xxHash64 checksum against the index, and every
// id against the index's vocabulary, so a corrupt or truncated shard is an error naming
// the file, never silent bad data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dseek::data {

enum class Split { train, validation };

// Every problem with a data set on disk: the message names the file.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class TokenDataset {
 public:
  // Opens the split of the prepared directory `dir`, maps its shards and checks them.
  static TokenDataset open(const std::filesystem::path& dir, Split split);

  TokenDataset(TokenDataset&&) noexcept;
  TokenDataset& operator=(TokenDataset&&) noexcept;
  ~TokenDataset();

  uint64_t num_tokens() const;   // tokens in this split
  uint32_t vocab_size() const;   // from the index (256 for the byte tokenizer)
  const std::string& tokenizer() const;         // its canonical name, from the index
  const std::string& tokenizer_sha256() const;  // of its rank file; "" for bytes
  const std::filesystem::path& dir() const;
  // Copies tokens [start, start + count) of the split into out; throws DataError past the end.
  void read(uint64_t start, uint64_t count, int32_t* out) const;

 private:
  struct Impl;
  explicit TokenDataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dseek::data
