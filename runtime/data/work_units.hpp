// The units of work of `dseek data prepare` on several nodes: every input file is one,
// except a large one that can be read from the middle (uncompressed JSON Lines, or text
// with a --text-separator) of at least 2 x PrepareOptions::split_bytes, which is cut into
// up to `nodes` byte ranges of at least split_bytes (the reader aligns them to document
// boundaries, input_documents.hpp). Compressed files stay whole: a gzip or zstd stream
// cannot be read from the middle. Units are in corpus order (a file's ranges in order),
// and unit u is node (u mod nodes)'s, so a file of N ranges is read by N nodes.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/data/prepare.hpp"
#include "runtime/data/source_files.hpp"

namespace dseek::data {

struct WorkUnits {
  std::vector<SourceFile> units;  // a file, or a file with its range
  std::vector<uint32_t> file;     // the unit's file in the listing
  uint64_t ranges = 0;            // units that are byte ranges
};

WorkUnits split_into_units(const SourceListing& listing, const PrepareOptions& options);

inline uint32_t unit_owner(uint32_t unit, uint32_t nodes) { return unit % nodes; }

}  // namespace dseek::data
