// Reading documents from text and JSON Lines files (see input_documents.hpp), through
// byte_source.hpp; JSON with simdjson's DOM parser, which validates the whole line.
#include "runtime/data/input_documents.hpp"

#include <simdjson.h>

#include <cstring>
#include <memory>
#include <vector>

#include "runtime/data/byte_source.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {

InputFormat format_of(const std::string& name) {
  return name.ends_with(".jsonl") || name.ends_with(".ndjson") ? InputFormat::jsonl
                                                                : InputFormat::text;
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

class JsonLines {
 public:
  JsonLines(const SourceFile& file, const InputOptions& options, InputCounts& counts,
            std::ostream& log, const DocumentSink& sink)
      : file_(file), options_(options), counts_(counts), log_(log), sink_(sink) {}

  void line(std::string_view text, uint64_t number) {
    if (is_blank(text)) return;
    padded_.assign(text.data(), text.size());
    padded_.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    simdjson::dom::element root;
    if (auto error = parser_.parse(padded_.data(), padded_.size(), false).get(root)) {
      problem(counts_.malformed_lines, number, std::string("malformed JSON (") +
                                                   simdjson::error_message(error) + ")");
      return;
    }
    simdjson::dom::object object;
    if (root.get_object().get(object)) {
      problem(counts_.malformed_lines, number, "the line is not a JSON object");
      return;
    }
    std::string_view value;
    if (object[options_.jsonl_field].get_string().get(value)) {
      problem(counts_.missing_field_lines, number,
              "no string field \"" + options_.jsonl_field + "\"");
      return;
    }
    if (options_.reject_nul_in_lines && value.find('\0') != std::string_view::npos) {
      problem(counts_.malformed_lines, number,
              "the text holds a NUL byte (the byte tokenizer's document separator)");
      return;
    }
    sink_(value, number);
  }

 private:
  void problem(uint64_t& counter, uint64_t number, const std::string& what) {
    const std::string message = file_.path.string() + ":" + std::to_string(number) + ": " + what;
    if (options_.strict) throw DataError(message + " (--strict)");
    ++counter;
    log_ << "data prepare: skipping " << message << "\n";
  }

  const SourceFile& file_;
  const InputOptions& options_;
  InputCounts& counts_;
  std::ostream& log_;
  const DocumentSink& sink_;
  simdjson::dom::parser parser_;
  std::string padded_;
};

}  // namespace

FileOutcome read_documents(const SourceFile& file, const InputOptions& options,
                           InputCounts& counts, std::ostream& log, const DocumentSink& sink) {
  Compression compression = Compression::none;
  std::unique_ptr<ByteSource> source = open_byte_source(file.path, compression);
  const InputFormat format = format_of(uncompressed_name(file.relative, compression));
  std::vector<char> chunk(1 << 17);
  try {
    if (format == InputFormat::text) {
      std::string text;
      while (size_t got = source->read(chunk.data(), chunk.size())) text.append(chunk.data(), got);
      if (text.empty()) return FileOutcome::empty;
      if (options.reject_nul && std::memchr(text.data(), 0, text.size()) != nullptr) {
        return FileOutcome::binary;
      }
      sink(text, 0);
      return FileOutcome::taken;
    }
    JsonLines lines(file, options, counts, log, sink);
    std::string pending;  // a line not ended yet
    uint64_t number = 0;
    bool any = false;
    while (size_t got = source->read(chunk.data(), chunk.size())) {
      any = true;
      std::string_view data(chunk.data(), got);
      size_t start = 0;
      for (size_t end; (end = data.find('\n', start)) != std::string_view::npos; start = end + 1) {
        if (pending.empty()) {
          lines.line(data.substr(start, end - start), ++number);
        } else {
          pending.append(data.substr(start, end - start));
          lines.line(pending, ++number);
          pending.clear();
        }
      }
      pending.append(data.substr(start));
    }
    if (!pending.empty()) lines.line(pending, ++number);
    return any ? FileOutcome::taken : FileOutcome::empty;
  } catch (const DamagedInput& error) {
    if (options.strict) throw DataError(std::string(error.what()) + " (--strict)");
    ++counts.damaged_files;
    log << "data prepare: skipping " << error.what() << " (the whole file)\n";
    return FileOutcome::damaged;
  }
}

}  // namespace dseek::data
