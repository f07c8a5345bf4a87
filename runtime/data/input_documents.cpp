// Reading documents from text and JSON Lines files (see input_documents.hpp), through
// byte_source.hpp; JSON with simdjson's DOM parser, which validates the whole line.
#include "runtime/data/input_documents.hpp"

#include <simdjson.h>

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
  if (format_ == InputFormat::jsonl) parser_ = std::make_unique<JsonLineParser>();
}

DocumentReader::~DocumentReader() = default;

bool DocumentReader::fill() {
  if (chunk_.empty()) chunk_.resize(1 << 17);
  chunk_start_ = 0;
  chunk_end_ = source_->read(chunk_.data(), chunk_.size());
  if (chunk_end_ > 0) any_ = true;
  return chunk_end_ > 0;
}

// The next line of a JSON Lines file (without its '\n'); false at the end. The line
// points into the chunk, or into line_ when it spans chunks.
bool DocumentReader::next_line(std::string_view& line) {
  line_.clear();
  bool partial = false;
  while (true) {
    if (chunk_start_ < chunk_end_) {
      std::string_view data(chunk_.data() + chunk_start_, chunk_end_ - chunk_start_);
      size_t end = data.find('\n');
      if (end != std::string_view::npos) {
        chunk_start_ += end + 1;
        ++number_;
        if (partial) {
          line_.append(data.substr(0, end));
          line = line_;
        } else {
          line = data.substr(0, end);
        }
        return true;
      }
      line_.append(data);
      partial = true;
      chunk_start_ = chunk_end_;
    }
    if (!fill()) {
      if (!partial) return false;
      ++number_;  // the last line, without a '\n'
      line = line_;
      return true;
    }
  }
}

bool DocumentReader::next(std::string_view& text, uint64_t& line) {
  if (finished_) return false;
  try {
    if (format_ == InputFormat::text) {
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
    }
    std::string_view current;
    while (true) {
      if (!next_line(current)) {
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
