// The matchers of pretokenizer.hpp. Each reads the code points from `start` on, trying
// the regex's alternatives in order; the comments name the alternative a branch is.
#include "runtime/data/pretokenizer.hpp"

#include "runtime/data/char_class.hpp"

namespace dseek::data {
namespace {

// A reader of valid UTF-8: the class and byte length of the code point at a position.
class Text {
 public:
  explicit Text(std::string_view text)
      : s_(reinterpret_cast<const unsigned char*>(text.data())), n_(text.size()) {}
  size_t size() const { return n_; }
  unsigned char byte(size_t p) const { return s_[p]; }
  CharClass at(size_t p, size_t& length) const {
    const unsigned b = s_[p];
    if (b < 0x80) {
      length = 1;
      return detail::kAsciiClasses[b];
    }
    char32_t c;
    if (b < 0xE0) {
      length = 2;
      c = ((b & 0x1Fu) << 6) | (s_[p + 1] & 0x3Fu);
    } else if (b < 0xF0) {
      length = 3;
      c = ((b & 0x0Fu) << 12) | ((s_[p + 1] & 0x3Fu) << 6) | (s_[p + 2] & 0x3Fu);
    } else {
      length = 4;
      c = ((b & 0x07u) << 18) | ((s_[p + 1] & 0x3Fu) << 12) | ((s_[p + 2] & 0x3Fu) << 6) |
          (s_[p + 3] & 0x3Fu);
    }
    return non_ascii_class(c);
  }
  // The end of the run of code points of class `k` that starts at p.
  size_t run(size_t p, CharClass k) const {
    size_t length = 0;
    while (p < n_ && at(p, length) == k) p += length;
    return p;
  }
  // The end of the run of \r and \n at p.
  size_t newlines(size_t p) const {
    while (p < n_ && (s_[p] == '\r' || s_[p] == '\n')) ++p;
    return p;
  }

 private:
  const unsigned char* s_;
  size_t n_;
};

bool is_space(CharClass k) { return k == CharClass::space || k == CharClass::newline; }
// \p{L}, \p{N} and [^\s\p{L}\p{N}]: the classes a run can be made of.
bool is_word(CharClass k) {
  return k == CharClass::letter || k == CharClass::number || k == CharClass::other;
}
unsigned char lower(unsigned char c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d at p (text.byte(p) == '\''), in ASCII lower case when
// `fold_case`: the end, or 0 when none matches.
size_t contraction(const Text& text, size_t p, bool fold_case) {
  if (p + 1 >= text.size()) return 0;
  auto get = [&](size_t i) { return fold_case ? lower(text.byte(i)) : text.byte(i); };
  const unsigned char a = get(p + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
  if (p + 2 >= text.size()) return 0;
  const unsigned char b = get(p + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return p + 3;
  return 0;
}

// \s+(?!\S)|\s+ at p (a white space): the whole run when it ends the text or is one
// code point, else the run less its last code point (which then starts the next piece).
size_t space_run(const Text& text, size_t p) {
  size_t q = p, last = p, length = 0;
  while (q < text.size() && is_space(text.at(q, length))) {
    last = q;
    q += length;
  }
  if (q == text.size() || last == p) return q;
  return last;
}

size_t r50k_piece_end(const Text& text, size_t p) {
  if (text.byte(p) == '\'') {  // 's|'t|'re|'ve|'m|'ll|'d
    if (size_t end = contraction(text, p, false)) return end;
  }
  size_t length = 0, next_length = 0;
  if (text.byte(p) == ' ' && p + 1 < text.size()) {  // ' ?' of the next three
    const CharClass next = text.at(p + 1, next_length);
    if (is_word(next)) return text.run(p + 1 + next_length, next);
  }
  const CharClass k = text.at(p, length);
  if (is_word(k)) return text.run(p + length, k);  // \p{L}+, \p{N}+, [^\s\p{L}\p{N}]+
  return space_run(text, p);
}

size_t cl100k_piece_end(const Text& text, size_t p) {
  if (text.byte(p) == '\'') {  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (size_t end = contraction(text, p, true)) return end;
  }
  size_t length = 0, next_length = 0;
  const CharClass k = text.at(p, length);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if ((k == CharClass::space || k == CharClass::other) && p + length < text.size() &&
      text.at(p + length, next_length) == CharClass::letter) {
    return text.run(p + length + next_length, CharClass::letter);
  }
  if (k == CharClass::letter) return text.run(p + length, CharClass::letter);
  if (k == CharClass::number) {  // \p{N}{1,3}
    size_t end = p + length;
    for (int i = 1; i < 3 && end < text.size() && text.at(end, next_length) == CharClass::number;
         ++i) {
      end += next_length;
    }
    return end;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  if (text.byte(p) == ' ' && p + 1 < text.size() &&
      text.at(p + 1, next_length) == CharClass::other) {
    return text.newlines(text.run(p + 1 + next_length, CharClass::other));
  }
  if (k == CharClass::other) return text.newlines(text.run(p + length, CharClass::other));
  // \s*[\r\n]+: the run up to and with its last \r or \n, when it has one.
  size_t q = p, newline_end = 0;
  while (q < text.size()) {
    const CharClass c = text.at(q, length);
    if (!is_space(c)) break;
    q += length;
    if (c == CharClass::newline) newline_end = q;
  }
  if (newline_end != 0) return newline_end;
  return space_run(text, p);  // \s+(?!\S)|\s+
}

}  // namespace

size_t piece_end(PreTokenizer kind, std::string_view text, size_t start) {
  const Text reader(text);
  return kind == PreTokenizer::r50k ? r50k_piece_end(reader, start)
                                    : cl100k_piece_end(reader, start);
}

}  // namespace dseek::data
