// Implementation of json_fields.hpp: a scanner over one object's top level, enough for
// the objects JsonLine writes (it never writes \u escapes but for control characters).
#include "runtime/util/json_fields.hpp"

#include <cstdlib>
#include <limits>

namespace dseek::util {

namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool take(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool at(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  // A string starting at the current quote; nullopt when it is not one or not closed.
  std::optional<std::string> string() {
    if (!take('"')) return std::nullopt;
    std::string out;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return std::nullopt;
      const char e = text_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) return std::nullopt;
          const std::string hex(text_.substr(pos_, 4));
          pos_ += 4;
          const long code = std::strtol(hex.c_str(), nullptr, 16);
          // JsonLine escapes only control characters this way: one byte each.
          out += static_cast<char>(code & 0xff);
          break;
        }
        default: out += e;  // \" \\ \/
      }
    }
    return std::nullopt;
  }

  // Skips any value (string, nested object or array, number, literal); false on a
  // malformed one.
  bool skip_value() {
    skip_space();
    if (pos_ >= text_.size()) return false;
    if (text_[pos_] == '"') return string().has_value();
    if (text_[pos_] == '{' || text_[pos_] == '[') {
      int depth = 0;
      while (pos_ < text_.size()) {
        const char c = text_[pos_];
        if (c == '"') {
          if (!string()) return false;
          continue;
        }
        ++pos_;
        if (c == '{' || c == '[') ++depth;
        if ((c == '}' || c == ']') && --depth == 0) return true;
      }
      return false;
    }
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '}' &&
           text_[pos_] != ']')
      ++pos_;
    return pos_ > start;
  }

  // The raw text of a scalar value (number or literal) at the current position.
  std::string_view scalar() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '}' &&
           text_[pos_] != ' ')
      ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // Moves to the value of top-level `key`; false when it is not there.
  bool find(std::string_view key) {
    if (!take('{')) return false;
    if (take('}')) return false;
    while (true) {
      const auto name = string();
      if (!name || !take(':')) return false;
      if (*name == key) return true;
      if (!skip_value()) return false;
      if (take(',')) continue;
      return false;
    }
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<double> json_number_field(std::string_view object, std::string_view key) {
  Scanner scanner(object);
  if (!scanner.find(key)) return std::nullopt;
  if (scanner.at('"') || scanner.at('{') || scanner.at('[')) return std::nullopt;
  const std::string text(scanner.scalar());
  if (text.empty()) return std::nullopt;
  // JsonLine writes NaN and the infinities as null: the number is not a finite one.
  if (text == "null") return std::numeric_limits<double>::quiet_NaN();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;  // true, false, junk
  return value;
}

std::optional<std::string> json_string_field(std::string_view object, std::string_view key) {
  Scanner scanner(object);
  if (!scanner.find(key)) return std::nullopt;
  if (!scanner.at('"')) return std::nullopt;
  return scanner.string();
}

}  // namespace dseek::util
