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
              uint64_t shard_tokens, TokenDtype dtype, uint32_t separator);

  // Appends one document; the separator goes before every document but the first.
  void append_document(const uint32_t* tokens, size_t count);
  // Finishes the last shard and returns the split's index entry.
  SplitEntry finish();

 private:
  ShardWriter& current();
  void close_current();

  std::filesystem::path dir_;
  std::string prefix_;
  uint64_t total_tokens_;
  uint64_t shard_tokens_;
  TokenDtype dtype_;
  uint32_t separator_;
  uint64_t planned_ = 0;  // tokens given to shards opened so far
  std::optional<ShardWriter> shard_;
  SplitEntry entry_;
};

}  // namespace dseek::data
