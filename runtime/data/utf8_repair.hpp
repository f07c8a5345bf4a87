// UTF-8 repair as the WHATWG Encoding Standard decodes text (TextDecoder, Node's
// Buffer.toString, hence js-tiktoken's input): each maximal invalid subsequence becomes
// one U+FFFD. The BPE tokenizers run on repaired text only, so their ids are the
// reference's on the decoded string whatever bytes come in.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dseek::data::utf8 {

// True when `bytes` is valid UTF-8 (no surrogates, nothing above U+10FFFF, no overlongs).
bool is_valid(std::string_view bytes);

// Replaces `out` with `bytes` repaired; returns the number of U+FFFD inserted.
size_t repair(std::string_view bytes, std::string& out);

}  // namespace dseek::data::utf8
