// The documents of one input file: a text file is one document; a JSON Lines file
// (.jsonl, .ndjson) holds one per line, the string in the field `jsonl_field` of the
// line's object. Either may be gzip or zstd compressed (.jsonl.gz, .txt.zst, ...).
// A damaged compressed file, a malformed JSON line, or a line without the text field is
// a problem: named (file and line) in the log, counted, and skipped (the whole file for
// a damaged one); with `strict` it is an error instead.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "runtime/data/source_files.hpp"

namespace dseek::data {

enum class InputFormat { text, jsonl };

struct InputOptions {
  std::string jsonl_field = "text";
  bool strict = false;
  bool reject_nul = true;  // a text file with a NUL byte is binary (skipped)
  // A JSON line whose text holds a NUL is a malformed line (prepare sets it for the byte
  // tokenizer, whose document separator NUL is).
  bool reject_nul_in_lines = false;
};

enum class FileOutcome { taken, empty, binary, damaged, unreadable };

struct InputCounts {
  uint64_t damaged_files = 0;      // truncated or corrupt gzip/zstd
  uint64_t malformed_lines = 0;    // not JSON, or not an object
  uint64_t missing_field_lines = 0;  // no string in the text field
};

// A document's text and where it is: line 0 for a whole file, else its 1-based line.
using DocumentSink = std::function<void(std::string_view text, uint64_t line)>;

// Reads `file`, calling `sink` for each document in order. On FileOutcome::damaged the
// documents already given belong to a file that is to be dropped.
FileOutcome read_documents(const SourceFile& file, const InputOptions& options,
                           InputCounts& counts, std::ostream& log, const DocumentSink& sink);

}  // namespace dseek::data
