// Reading documents from text and JSON Lines files (see input_documents.hpp), through
// byte_source.hpp; JSON with simdjson's DOM parser, which validates the whole line.
#include "runtime/data/input_documents.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>

#include "runtime/data/byte_source.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

class JsonLineParser {
 public:
  simdjson::dom::parser parser;
  std::string padded;
};

namespace {

InputFormat format_of(const std::string& name) {
  return name.ends_with(".jsonl") || name.ends_with(".ndjson") ? InputFormat::jsonl
                                                                : InputFormat::text;
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

DocumentReader::DocumentReader(const SourceFile& file, const InputOptions& options)
    : file_(file), options_(options) {
  Compression compression = Compression::none;
  source_ = open_byte_source(file.path, compression);
  format_ = format_of(uncompressed_name(file.relative, compression));
  if (format_ == InputFormat::jsonl) {
    parser_ = std::make_unique<JsonLineParser>();
    separator_.assign(1, '\n');  // (a string literal here trips GCC 12 -Wrestrict)
  } else {
    separator_ = options.text_separator;
  }
  if (file.range) {
    if (compression != Compression::none || separator_.empty()) {
      throw DataError("cannot read a byte range of " + file.path.string() +
                      ": only uncompressed JSON Lines and text files with a separator split");
    }
    skip_to_range();
  }
}

DocumentReader::~DocumentReader() = default;

// The next segment (the bytes up to the next separator, or to the end); false at the
// end of the file or of the range. It points into buffer_, valid until the next call.
bool DocumentReader::next_segment(std::string_view& segment) {
  if (range_done_) return false;
  constexpr size_t kChunk = 1 << 17;
  while (true) {
    const size_t found = buffer_.find(separator_, searched_);
    if (found != std::string::npos) {
      segment = std::string_view(buffer_).substr(start_, found - start_);
      last_separator_at_ = offset_ + found;
      start_ = searched_ = found + separator_.size();
      ++number_;
      if (last_separator_at_ >= range_end_) range_done_ = true;
      return true;
    }
    if (at_end_) {
      if (start_ >= buffer_.size()) return false;
      segment = std::string_view(buffer_).substr(start_);
      last_separator_at_ = UINT64_MAX;
      start_ = searched_ = buffer_.size();
      ++number_;
      return true;
    }
    // A separator may straddle what is read and what comes: search its start again.
    const size_t keep = separator_.size() - 1;
    searched_ = std::max(start_, buffer_.size() > keep ? buffer_.size() - keep : 0);
    if (start_ > 0) {
      buffer_.erase(0, start_);
      offset_ += start_;
      searched_ -= start_;
      start_ = 0;
    }
    const size_t old = buffer_.size();
    buffer_.resize(old + kChunk);
    const size_t got = source_->read(buffer_.data() + old, kChunk);
    buffer_.resize(old + got);
    if (got == 0) at_end_ = true;
    else any_ = true;
  }
}

// A range after the first: past the segments of the ranges before (the one whose
// separator begins at or after the range's begin is the last of the range before).
void DocumentReader::skip_to_range() {
  const ByteRange& range = *file_.range;
  std::string_view segment;
  if (range.begin > 0) {
    while (next_segment(segment)) {
      if (last_separator_at_ != UINT64_MAX && last_separator_at_ >= range.begin) break;
    }
  }
  if (range.index + 1 < range.count) range_end_ = range.end;
  // The separator that ends the ranges before is past this range's end too: a document
  // longer than the range took all of it.
  if (range.begin > 0 && last_separator_at_ >= range_end_) range_done_ = true;
}

bool DocumentReader::next_text(std::string_view& text, uint64_t& line) {
  std::string_view segment;
  while (next_segment(segment)) {
    // The file's bytes, as a whole text file's: a NUL makes it binary (all of it).
    if (options_.reject_nul && segment.find('\0') != std::string_view::npos) {
      finished_ = true;
      outcome_ = FileOutcome::binary;
      return false;
    }
    if (is_blank(segment)) continue;
    text = segment;
    line = number_;
    return true;
  }
  finished_ = true;
  outcome_ = any_ ? FileOutcome::taken : FileOutcome::empty;
  return false;
}

bool DocumentReader::next_json(std::string_view& text, uint64_t& line) {
  std::string_view current;
  while (true) {
    if (!next_segment(current)) {
      finished_ = true;
      outcome_ = any_ ? FileOutcome::taken : FileOutcome::empty;
      return false;
    }
    if (is_blank(current)) continue;
    JsonLineParser& json = *parser_;
    json.padded.assign(current.data(), current.size());
    json.padded.reserve(current.size() + simdjson::SIMDJSON_PADDING);
    auto problem = [&](uint64_t& counter, const std::string& what) {
      const std::string message = file_.path.string() + ":" + std::to_string(number_) + ": " + what;
      if (options_.strict) throw DataError(message + " (--strict)");
      ++counter;
      problems.push_back("skipping " + message);
    };
    simdjson::dom::element root;
    if (auto error = json.parser.parse(json.padded.data(), json.padded.size(), false).get(root)) {
      problem(counts.malformed_lines,
              std::string("malformed JSON (") + simdjson::error_message(error) + ")");
      continue;
    }
    simdjson::dom::object object;
    if (root.get_object().get(object)) {
      problem(counts.malformed_lines, "the line is not a JSON object");
      continue;
    }
    std::string_view value;
    if (object[options_.jsonl_field].get_string().get(value)) {
      problem(counts.missing_field_lines, "no string field \"" + options_.jsonl_field + "\"");
      continue;
    }
    if (options_.reject_nul_in_lines && value.find('\0') != std::string_view::npos) {
      problem(counts.malformed_lines,
              "the text holds a NUL byte (the byte tokenizer's document separator)");
      continue;
    }
    text = value;  // in the parser's document, valid until the next parse
    line = number_;
    return true;
  }
}

bool DocumentReader::next(std::string_view& text, uint64_t& line) {
  if (finished_) return false;
  try {
    if (format_ == InputFormat::jsonl) return next_json(text, line);
    if (!separator_.empty()) return next_text(text, line);
    finished_ = true;
    std::vector<char> buffer(1 << 17);
    while (size_t got = source_->read(buffer.data(), buffer.size())) text_.append(buffer.data(), got);
    if (text_.empty()) {
      outcome_ = FileOutcome::empty;
      return false;
    }
    if (options_.reject_nul && std::memchr(text_.data(), 0, text_.size()) != nullptr) {
      outcome_ = FileOutcome::binary;
      return false;
    }
    text = text_;
    line = 0;
    return true;
  } catch (const DamagedInput& error) {
    if (options_.strict) throw DataError(std::string(error.what()) + " (--strict)");
    finished_ = true;
    ++counts.damaged_files;
    problems.push_back(std::string("skipping ") + error.what() + " (the whole file)");
    outcome_ = FileOutcome::damaged;
    return false;
  }
}

}  // namespace dseek::data
