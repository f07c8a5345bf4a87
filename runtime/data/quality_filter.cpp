// Quality filters (see quality_filter.hpp). Characters are code points of valid UTF-8
// (the decode stage repaired the text); classes as the tokenizer's (char_class.hpp).
#include "runtime/data/quality_filter.hpp"

#include <string>
#include <unordered_set>

#include "runtime/data/char_class.hpp"

namespace dseek::data {
namespace {

char32_t next_code_point(std::string_view text, size_t& i) {
  const auto b = static_cast<unsigned char>(text[i]);
  size_t length = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (i + length > text.size()) length = text.size() - i;
  char32_t c = length == 1 ? b : length == 2 ? (b & 0x1F) : length == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  i += length;
  return c;
}

struct CharCounts {
  uint64_t chars = 0, non_space = 0, digits = 0, symbols = 0;
};

CharCounts count_chars(std::string_view text) {
  CharCounts counts;
  for (size_t i = 0; i < text.size();) {
    const CharClass k = char_class(next_code_point(text, i));
    ++counts.chars;
    if (k == CharClass::space || k == CharClass::newline) continue;
    ++counts.non_space;
    if (k == CharClass::number) ++counts.digits;
    if (k == CharClass::other) ++counts.symbols;
  }
  return counts;
}

// Of the lines with at least 8 non-space bytes, the share that repeat an earlier one
// (shorter lines, like "}" or "end", repeat in any normal code).
double repeated_line_share(std::string_view text) {
  std::unordered_set<std::string_view> seen;
  uint64_t lines = 0, repeated = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") + 1 - first);
    size_t non_space = 0;
    for (char c : line) non_space += c != ' ' && c != '\t';
    if (non_space < 8) continue;
    ++lines;
    if (!seen.insert(line).second) ++repeated;
  }
  return lines == 0 ? 0.0 : static_cast<double>(repeated) / static_cast<double>(lines);
}

}  // namespace

DropReason quality_verdict(std::string_view text, const CleanSettings& settings) {
  if (text.empty()) return DropReason::empty;
  const CharCounts counts = count_chars(text);
  if (settings.min_chars != 0 && counts.chars < settings.min_chars) return DropReason::too_short;
  if (settings.max_chars != 0 && counts.chars > settings.max_chars) return DropReason::too_long;
  if (counts.non_space >= settings.ratio_min_chars && counts.non_space > 0) {
    const double non_space = static_cast<double>(counts.non_space);
    if (settings.max_symbol_ratio < 1.0 &&
        static_cast<double>(counts.symbols) / non_space > settings.max_symbol_ratio) {
      return DropReason::symbol_ratio;
    }
    if (settings.max_digit_ratio < 1.0 &&
        static_cast<double>(counts.digits) / non_space > settings.max_digit_ratio) {
      return DropReason::digit_ratio;
    }
  }
  if (settings.max_repeated_lines < 1.0 &&
      repeated_line_share(text) > settings.max_repeated_lines) {
    return DropReason::repeated_lines;
  }
  return DropReason::kept;
}

}  // namespace dseek::data
