// UTF-8 repair and NFC (see text_decode.hpp). ASCII text, most of a code corpus, is
// already both and is copied as it is.
#include "runtime/data/text_decode.hpp"

#include <utf8proc.h>

#include <cstdlib>

#include "runtime/data/token_dataset.hpp"
#include "runtime/data/utf8_repair.hpp"

namespace dseek::data {
namespace {

bool is_ascii(std::string_view text) {
  unsigned char any = 0;  // no early exit: the loop vectorizes
  for (unsigned char c : text) any |= c;
  return any < 0x80;
}

}  // namespace

size_t decode_text(std::string_view raw, bool repair, bool nfc, std::string& out) {
  if (is_ascii(raw)) {
    out.assign(raw);
    return 0;
  }
  size_t replaced = 0;
  if (utf8::is_valid(raw)) {
    out.assign(raw);
  } else if (repair) {
    replaced = utf8::repair(raw, out);
  } else {
    out.assign(raw);
    return 0;
  }
  if (!nfc) return replaced;
  utf8proc_uint8_t* composed = nullptr;
  const utf8proc_ssize_t length = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(out.data()), static_cast<utf8proc_ssize_t>(out.size()),
      &composed, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (length < 0) {
    throw DataError(std::string("NFC normalization failed: ") + utf8proc_errmsg(length));
  }
  out.assign(reinterpret_cast<const char*>(composed), static_cast<size_t>(length));
  std::free(composed);
  return replaced;
}

}  // namespace dseek::data
