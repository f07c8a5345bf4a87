// The character classes of the tiktoken pre-tokenizer regexes, as the reference
// (js-tiktoken, JavaScript regexes with the u flag) sees them: \p{L} (letter), \p{N}
// (number), \s split into \r \n (newline, which cl100k_base treats apart) and the other
// white space, and everything else. Categories come from utf8proc; code points that
// Unicode assigned after utf8proc's tables are added from unicode_additions.inc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace dseek::data {

enum class CharClass : uint8_t { letter, number, newline, space, other };

namespace detail {
constexpr std::array<CharClass, 128> ascii_classes() {
  std::array<CharClass, 128> table{};
  for (int c = 0; c < 128; ++c) {
    CharClass k = CharClass::other;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) k = CharClass::letter;
    if (c >= '0' && c <= '9') k = CharClass::number;
    if (c == '\t' || c == '\v' || c == '\f' || c == ' ') k = CharClass::space;
    if (c == '\r' || c == '\n') k = CharClass::newline;
    table[static_cast<std::size_t>(c)] = k;
  }
  return table;
}
inline constexpr std::array<CharClass, 128> kAsciiClasses = ascii_classes();
}  // namespace detail

// The class of a code point beyond ASCII.
CharClass non_ascii_class(char32_t code_point);

inline CharClass char_class(char32_t code_point) {
  return code_point < 128 ? detail::kAsciiClasses[code_point] : non_ascii_class(code_point);
}

}  // namespace dseek::data
