// UTF-8 validation (simdjson's) and WHATWG repair (see utf8_repair.hpp).
#include "runtime/data/utf8_repair.hpp"

#include <simdjson.h>

namespace dseek::data::utf8 {

bool is_valid(std::string_view bytes) {
  return simdjson::validate_utf8(bytes.data(), bytes.size());
}

// The decoder of https://encoding.spec.whatwg.org/#utf-8-decoder, copying the bytes of
// each valid sequence and writing U+FFFD for each error.
size_t repair(std::string_view bytes, std::string& out) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  out.clear();
  out.reserve(bytes.size() + 16);
  size_t replaced = 0;
  size_t needed = 0, seen = 0, start = 0;
  unsigned lower = 0x80, upper = 0xBF;
  for (size_t i = 0; i < bytes.size();) {
    const unsigned b = static_cast<unsigned char>(bytes[i]);
    if (needed == 0) {
      start = i++;
      if (b <= 0x7F) {
        out.push_back(static_cast<char>(b));
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower = 0xA0;
        if (b == 0xED) upper = 0x9F;
        needed = 2;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower = 0x90;
        if (b == 0xF4) upper = 0x8F;
        needed = 3;
      } else {
        out.append(kReplacement);
        ++replaced;
      }
      continue;
    }
    if (b < lower || b > upper) {
      // The sequence so far is one error; this byte is looked at again as a start.
      needed = seen = 0;
      lower = 0x80;
      upper = 0xBF;
      out.append(kReplacement);
      ++replaced;
      continue;
    }
    lower = 0x80;
    upper = 0xBF;
    ++i;
    if (++seen == needed) {
      out.append(bytes.substr(start, needed + 1));
      needed = seen = 0;
    }
  }
  if (needed != 0) {
    out.append(kReplacement);
    ++replaced;
  }
  return replaced;
}

}  // namespace dseek::data::utf8
