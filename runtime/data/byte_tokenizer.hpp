// The byte-level tokenizer of prepared data sets: a token is a byte value, and a NUL
// token separates documents. Text files never contain NUL, which is also why a file
// with one is treated as binary and skipped.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace dseek::data::byte_tokenizer {

inline constexpr std::string_view kName = "bytes";
inline constexpr uint32_t kVocabSize = 256;
inline constexpr uint16_t kSeparator = 0;

inline bool looks_binary(const char* bytes, size_t size) {
  return size != 0 && std::memchr(bytes, 0, size) != nullptr;
}

}  // namespace dseek::data::byte_tokenizer
