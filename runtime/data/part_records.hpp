// The binary records of `dseek data prepare` on several nodes (OUT/.parts/: document
// hashes, duplicate lists, MinHash signatures, near-candidate lists; hash_partition.hpp,
// band_partition.hpp): raw values in host order after a magic line naming the file's kind
// and version. The nodes of one job run the same build on the same kind of host.
#pragma once

#include <filesystem>
#include <fstream>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data::parts {

template <class T>
void put(std::ostream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof value);
}

template <class T>
bool get(std::istream& in, T& value) {
  in.read(reinterpret_cast<char*>(&value), sizeof value);
  return static_cast<bool>(in);
}

// Reads `magic` off the start of `in`; DataError naming `path` when it is not there.
inline void check_magic(std::istream& in, const std::filesystem::path& path, std::string_view magic) {
  std::string head(magic.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(magic.size()));
  if (!in || head != magic) throw DataError("damaged or missing " + path.string() + ": rerun the nodes");
}

// Closes `out` (written to `tmp`) and renames it to `path`: a part appears whole or not
// at all. DataError naming the file when either fails.
inline void commit(std::ofstream& out, const std::filesystem::path& tmp, const std::filesystem::path& path) {
  out.close();
  if (!out) throw DataError("cannot write " + tmp.string());
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error) throw DataError("cannot rename " + tmp.string() + ": " + error.message());
}

}  // namespace dseek::data::parts
