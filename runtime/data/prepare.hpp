// `dseek data prepare`: turns a directory of text and JSON Lines files (optionally gzip
// or zstd compressed) into a prepared token data set: tokens of a chosen tokenizer in
// shards (uint16 when the vocabulary fits, else uint32), a train/validation split by
// share of tokens, an xxHash64 checksum per shard, and a Cap'n Proto index that records
// the tokenizer, the SHA-256 of its rank file and its vocabulary. See token_dataset.hpp
// for the reader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

#include "runtime/data/input_documents.hpp"
#include "runtime/data/source_files.hpp"

namespace dseek::data {

struct PrepareOptions {
  std::filesystem::path input;            // directory walked recursively
  std::filesystem::path output;           // created; must be empty or absent
  std::string tokenizer = "bytes";        // a name or a .tiktoken file (tokenizer.hpp)
  double val_fraction = 0.05;             // share of the tokens for validation; 0 = none
  uint64_t shard_tokens = 16u << 20;      // tokens per shard file
  uint64_t max_bytes = 0;                 // stop after this many bytes of text; 0 = all
                                          // (the document that reaches it is cut there)
  InputOptions input_options;             // JSONL text field, --strict
  SourceFilter filter;                    // --include / --exclude globs
};

struct PrepareSummary {
  uint64_t documents = 0;
  uint64_t skipped_files = 0;  // binary, unreadable, empty or damaged files, not taken
  uint64_t train_tokens = 0;
  uint64_t val_tokens = 0;
  uint64_t shards = 0;
  // The details of the counts above.
  uint64_t train_documents = 0;   // documents with tokens in train (one may be in both)
  uint64_t val_documents = 0;
  uint64_t content_tokens = 0;    // tokens of the documents, separators not counted
  uint64_t val_content_tokens = 0;
  uint64_t binary_files = 0;      // contain a NUL byte
  uint64_t unreadable_files = 0;
  uint64_t empty_files = 0;
  uint64_t damaged_files = 0;     // truncated or corrupt gzip/zstd
  uint64_t hidden_files = 0;      // hidden or version-control files, left out
  uint64_t filtered_files = 0;    // left out by --include/--exclude
  uint64_t malformed_lines = 0;   // JSON Lines that are not a JSON object
  uint64_t missing_field_lines = 0;
  uint64_t empty_documents = 0;   // no tokens (an empty text field)
  uint64_t input_bytes = 0;       // bytes of the documents' text taken
};

// Writes the data set; throws DataError naming the file on any failure. Progress,
// skipped inputs and the summary go to `log`.
PrepareSummary prepare_text_dataset(const PrepareOptions& options, std::ostream& log);

}  // namespace dseek::data
