// Writes one split (train or validation) as a sequence of shards named
// "<prefix>-00000.tok", ... of at most shard_tokens tokens each. The split's total is
// known in advance, so every shard's header can be written before its tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/shard_file.hpp"

namespace dseek::data {

class SplitWriter {
 public:
  SplitWriter(std::filesystem::path dir, std::string prefix, uint64_t total_tokens,
              uint64_t shard_tokens);

  // Appends one document; a separator token goes before every document but the first.
  void append_document(const unsigned char* bytes, size_t size);
  // Finishes the last shard and returns the split's index entry.
  SplitEntry finish();

 private:
  ShardWriter& current();
  void close_current();

  std::filesystem::path dir_;
  std::string prefix_;
  uint64_t total_tokens_;
  uint64_t shard_tokens_;
  uint64_t planned_ = 0;  // tokens given to shards opened so far
  std::optional<ShardWriter> shard_;
  SplitEntry entry_;
};

}  // namespace dseek::data
