// Cutting the inputs into units of work for several nodes (see work_units.hpp).
#include "runtime/data/work_units.hpp"

#include <algorithm>

#include "runtime/data/byte_source.hpp"

namespace dseek::data {
namespace {

// Whether the reader can start in the middle of the file: uncompressed (by its magic
// bytes, as the reader finds it) and made of separated documents.
bool splittable(const SourceFile& file, const InputOptions& input) {
  Compression compression = Compression::none;
  try {
    open_byte_source(file.path, compression);
  } catch (const DataError&) {
    return false;  // unreadable: one unit, whose reader says so
  }
  if (compression != Compression::none) return false;
  const std::string& name = file.relative;
  const bool jsonl = name.ends_with(".jsonl") || name.ends_with(".ndjson");
  return jsonl || !input.text_separator.empty();
}

}  // namespace

WorkUnits split_into_units(const SourceListing& listing, const PrepareOptions& options) {
  WorkUnits units;
  for (uint32_t f = 0; f < listing.files.size(); ++f) {
    const SourceFile& file = listing.files[f];
    std::error_code error;
    const uint64_t size = std::filesystem::file_size(file.path, error);
    const uint64_t count =
        error ? 1 : std::min<uint64_t>(options.nodes, size / options.split_bytes);
    if (count < 2 || !splittable(file, options.input_options)) {
      units.units.push_back(file);
      units.file.push_back(f);
      continue;
    }
    for (uint64_t r = 0; r < count; ++r) {
      SourceFile part = file;
      part.range = ByteRange{size * r / count, size * (r + 1) / count, static_cast<uint32_t>(r),
                             static_cast<uint32_t>(count)};
      units.units.push_back(std::move(part));
      units.file.push_back(f);
      ++units.ranges;
    }
  }
  return units;
}

}  // namespace dseek::data
