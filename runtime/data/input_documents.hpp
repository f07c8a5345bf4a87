// The documents of one input file, read one at a time: a text file is one document, or
// with a `text_separator` the texts between its separators (a large corpus file); a
// JSON Lines file (.jsonl, .ndjson) holds one per line, the string in the field
// `jsonl_field` of the line's object. Either may be gzip or zstd compressed (.jsonl.gz,
// .txt.zst, ...). A file with a ByteRange (SourceFile::range) gives only the documents
// of its range: those after the first separator (newline for JSON Lines) that begins at
// or after the range's begin, up to and with the document whose separator begins at or
// after its end; so the ranges of a file share its documents, each read once. Their
// lines are the file's (the bytes before are scanned for separators, not decoded). A damaged compressed file, a malformed JSON line, or a line without
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
  // Non-empty: a text file is the documents between these bytes (blank ones skipped),
  // each numbered as a "line" from 1; empty: a text file is one document.
  std::string text_separator;
  // A JSON line whose text holds a NUL is a malformed line (prepare sets it for the byte
  // tokenizer, whose document separator NUL is).
  bool reject_nul_in_lines = false;
};

enum class FileOutcome { taken, empty, binary, damaged, unreadable };
// None of the file's documents count (a separated text file can turn out binary, a
// compressed one damaged, after documents were read).
inline bool file_dropped(FileOutcome outcome) {
  return outcome == FileOutcome::damaged || outcome == FileOutcome::unreadable ||
         outcome == FileOutcome::binary;
}

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
  // file, else its 1-based line, or document of a separated text file); false at the end, when outcome() tells how the file
  // ended. With FileOutcome::damaged the documents already given are to be dropped.
  // Throws DataError when the file cannot be read (and under strict, on a problem).
  bool next(std::string_view& text, uint64_t& line);
  FileOutcome outcome() const { return outcome_; }

  InputCounts counts;                // problems so far
  std::vector<std::string> problems; // their log lines, taken by the caller

 private:
  bool next_segment(std::string_view& segment);
  bool next_text(std::string_view& text, uint64_t& line);
  bool next_json(std::string_view& text, uint64_t& line);
  void skip_to_range();

  const SourceFile& file_;
  const InputOptions& options_;
  std::unique_ptr<ByteSource> source_;
  InputFormat format_ = InputFormat::text;
  std::unique_ptr<JsonLineParser> parser_;
  FileOutcome outcome_ = FileOutcome::taken;
  bool finished_ = false, any_ = false;
  std::string text_;         // a whole text file
  // Separated input (JSON Lines, or text with a separator): the bytes read and not yet
  // given, buffer_[start_..), the file offset of buffer_[0], and how far the search for
  // the next separator got.
  std::string separator_;
  std::string buffer_;
  size_t start_ = 0, searched_ = 0;
  uint64_t offset_ = 0;
  bool at_end_ = false;      // the source is read to its end
  uint64_t range_end_ = UINT64_MAX;  // stop after the segment whose separator begins here or later
  uint64_t last_separator_at_ = 0;   // the file offset of the last segment's separator
  bool range_done_ = false;
  uint64_t number_ = 0;      // the current line (segment)
};

}  // namespace dseek::data
