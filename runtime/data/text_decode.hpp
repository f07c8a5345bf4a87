// The decode stage's text step: invalid UTF-8 repaired (each maximal invalid sequence one
// U+FFFD, as utf8_repair.hpp) and, optionally, Unicode NFC (utf8proc), so that the same
// text written with composed or decomposed accents is one text for dedup and the
// tokenizer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dseek::data {

// Replaces `out` with `raw` decoded; returns the number of U+FFFD inserted. Without
// `repair`, invalid UTF-8 stays as it is (and such a text is not normalized).
size_t decode_text(std::string_view raw, bool repair, bool nfc, std::string& out);

}  // namespace dseek::data
