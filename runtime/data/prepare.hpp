// `dseek data prepare`: turns a directory of text files into a prepared token data set
// (byte-level tokens in shards, a train/validation split by document, an xxHash64
// checksum per shard, and a Cap'n Proto index). See token_dataset.hpp for the reader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>

namespace dseek::data {

struct PrepareOptions {
  std::filesystem::path input;            // directory walked recursively for text files
  std::filesystem::path output;           // created; must be empty or absent
  double val_fraction = 0.05;             // share of documents (by hash) for validation
  uint64_t shard_tokens = 16u << 20;      // tokens per shard file
  uint64_t max_bytes = 0;                 // stop after this many input bytes; 0 = all
                                          // (the document that reaches it is cut there)
};

struct PrepareSummary {
  uint64_t documents = 0;
  uint64_t skipped_files = 0;  // binary, unreadable or empty files, not taken
  uint64_t train_tokens = 0;
  uint64_t val_tokens = 0;
  uint64_t shards = 0;
  // The details of the counts above.
  uint64_t train_documents = 0;
  uint64_t val_documents = 0;
  uint64_t binary_files = 0;      // contain a NUL byte
  uint64_t unreadable_files = 0;
  uint64_t empty_files = 0;
  uint64_t input_bytes = 0;       // bytes of the documents taken
};

// Writes the data set; throws DataError naming the file on any failure. Progress and
// the summary go to `log`.
PrepareSummary prepare_text_dataset(const PrepareOptions& options, std::ostream& log);

}  // namespace dseek::data
