// Reading an input file as a stream of bytes, decompressed when it is gzip or zstd
// (found by its magic bytes, whatever its name). A compressed file that ends before its
// last frame does, or whose data is corrupt, throws DamagedInput naming it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

enum class Compression { none, gzip, zstd };

struct DamagedInput : DataError {
  using DataError::DataError;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to `capacity` bytes into `out`; 0 at the end. Throws DamagedInput or DataError.
  virtual size_t read(char* out, size_t capacity) = 0;
};

// Opens `path`; `compression` tells what was found. Throws DataError when it cannot be
// opened.
std::unique_ptr<ByteSource> open_byte_source(const std::filesystem::path& path,
                                             Compression& compression);

// The name with a compression suffix (.gz, .zst, .zstd) removed when `compression` is
// not none, so the format can be read from what is left ("a.jsonl.gz" -> "a.jsonl").
std::string uncompressed_name(const std::string& name, Compression compression);

}  // namespace dseek::data
