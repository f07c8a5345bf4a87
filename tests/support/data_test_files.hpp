// What the data-preparation tests share: writing an input file (its folders made) and
// reading one back, a gzip stream of a text (zlib), a document of random words, and the
// message of the DataError an action throws.
#pragma once

#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "runtime/data/token_dataset.hpp"

namespace dseek::testing {

inline void write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
  REQUIRE(out.good());
}

// A whole file's bytes.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `text` as a gzip stream (.gz input files).
inline std::string gzip(const std::string& text) {
  z_stream stream{};
  REQUIRE(deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&stream, text.size()) + 64, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&stream, Z_FINISH) == Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// `first` and `words` pseudo-random words of a 400-word vocabulary ("abord", ...): a
// document no other seed gives (its shingles differ), for the dedup tests.
inline std::string random_words(const std::string& first, uint64_t seed, int words) {
  std::string text = first;
  uint64_t state = seed * 2654435761u + 1;
  for (int w = 0; w < words; ++w) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int n = static_cast<int>((state >> 33) % 400);
    text += ' ';
    text += static_cast<char>('a' + n % 26);
    text += static_cast<char>('a' + n / 26 % 26);
    text += "ord";
  }
  return text;
}

// The DataError message of `action`, or "" if it did not throw one.
inline std::string data_error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const data::DataError& error) {
    return error.what();
  }
  return "";
}

}  // namespace dseek::testing
