// The write stage of `dseek data prepare`: takes the pieces in corpus order, keeps the
// kept documents' tokens in a temporary file (token_spill.hpp) and counts every
// document by its drop reason; a damaged file's documents are taken back when its last
// piece tells. finish() then fixes the split by tokens and writes the checksummed
// shards and, last and atomically, the index: without it the directory is not a data
// set, so an interrupted run is never mistaken for a finished one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/token_spill.hpp"

namespace dseek::data {

class Tokenizer;

class DatasetBuilder {
 public:
  DatasetBuilder(const PrepareOptions& options, const Tokenizer& tokenizer,
                 std::filesystem::path source_dir);

  void add(const Piece& piece);

  // A point to come back to (the piece being added when its actor crashed).
  struct Mark {
    uint64_t tokens = 0;
    size_t documents = 0;
    PrepareSummary summary, file;
  };
  Mark mark() const { return {spill_.size(), documents_.size(), summary_, file_}; }
  void rollback(const Mark& mark);

  const PrepareSummary& summary() const { return summary_; }
  // The split, the shards and the index; throws DataError when no document is left.
  PrepareSummary finish();

 private:
  struct Document {
    uint64_t first;           // in the token file
    uint64_t tokens;
    uint64_t key_hash;        // of "relative path\nline": decides the split
    uint64_t val_tokens = 0;  // its first val_tokens tokens go to validation
  };

  const PrepareOptions& options_;
  const Tokenizer& tokenizer_;
  std::filesystem::path source_dir_;
  TokenSpill spill_;
  std::vector<Document> documents_;
  PrepareSummary summary_;  // of the files finished
  PrepareSummary file_;     // of the current file, until it ends
  uint64_t file_tokens_ = 0;
  size_t file_documents_ = 0;
};

}  // namespace dseek::data
