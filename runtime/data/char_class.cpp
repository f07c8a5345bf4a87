// Classes of non-ASCII code points (see char_class.hpp).
#include "runtime/data/char_class.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <iterator>

namespace dseek::data {
namespace {

struct Addition {
  char32_t first, last;
  char cls;  // 'L' or 'N'
};
constexpr Addition kAdditions[] = {
#include "runtime/data/unicode_additions.inc"
};

// JavaScript's \s beyond ASCII: U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
// U+205F, U+3000 and U+FEFF. (Python tiktoken's regex crate has U+0085 and not U+FEFF.)
bool is_js_space(char32_t c) {
  return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

CharClass addition_class(char32_t c) {
  auto it = std::upper_bound(std::begin(kAdditions), std::end(kAdditions), c,
                             [](char32_t value, const Addition& a) { return value < a.first; });
  if (it == std::begin(kAdditions)) return CharClass::other;
  --it;
  if (c > it->last) return CharClass::other;
  return it->cls == 'L' ? CharClass::letter : CharClass::number;
}

}  // namespace

CharClass non_ascii_class(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return CharClass::letter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return CharClass::number;
    case UTF8PROC_CATEGORY_CN:
      return addition_class(c);
    default:
      return is_js_space(c) ? CharClass::space : CharClass::other;
  }
}

}  // namespace dseek::data
