// The documents of one input file, read one at a time: a text file is one document; a
// JSON Lines file (.jsonl, .ndjson) holds one per line, the string in the field
// `jsonl_field` of the line's object. Either may be gzip or zstd compressed (.jsonl.gz,
// .txt.zst, ...). A damaged compressed file, a malformed JSON line, or a line without
// the text field is a problem: named (file and line) in `problems`, counted, and skipped
// (the whole file for a damaged one); with `strict` it is an error (DataError) instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

class ByteSource;
class JsonLineParser;

class DocumentReader {
 public:
  // Opens the file; throws DataError naming it when it cannot be opened.
  DocumentReader(const SourceFile& file, const InputOptions& options);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // The next document's text (valid until the next call) and line (0 for a whole
  // file, else its 1-based line); false at the end, when outcome() tells how the file
  // ended. With FileOutcome::damaged the documents already given are to be dropped.
  // Throws DataError when the file cannot be read (and under strict, on a problem).
  bool next(std::string_view& text, uint64_t& line);
  FileOutcome outcome() const { return outcome_; }

  InputCounts counts;                // problems so far
  std::vector<std::string> problems; // their log lines, taken by the caller

 private:
  bool next_line(std::string_view& line);
  bool fill();

  const SourceFile& file_;
  const InputOptions& options_;
  std::unique_ptr<ByteSource> source_;
  InputFormat format_ = InputFormat::text;
  std::unique_ptr<JsonLineParser> parser_;
  FileOutcome outcome_ = FileOutcome::taken;
  bool finished_ = false, any_ = false;
  std::string text_;         // a whole text file
  std::vector<char> chunk_;  // JSON Lines: the bytes read, from chunk_start_
  size_t chunk_start_ = 0, chunk_end_ = 0;
  std::string line_;         // a line across chunks
  uint64_t number_ = 0;      // the current line
};

}  // namespace dseek::data
