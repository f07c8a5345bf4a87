// What the file-reading fuzz targets share: a scratch directory of their own (made once
// per process, under $TMPDIR) and writing one input as a file in it, so that each target
// runs the reader exactly as a user's file reaches it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dseek::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "dseek-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    return std::filesystem::path(pattern);
  }();
  return dir;
}

inline void write_input(const std::filesystem::path& file, const uint8_t* data, size_t size) {
  std::FILE* out = std::fopen(file.c_str(), "wb");
  if (out == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, out) != size) std::abort();
  std::fclose(out);
}

// Several files from one input (fuzz/make_seeds.py writes such bundles): for each, a
// 2-byte little-endian name length, the name, a 4-byte little-endian size, the bytes. A
// short or oversized last record ends the list; a name that is not a plain file name
// (empty, '/', "." or "..") is skipped, so every file stays inside the scratch folder.
inline std::vector<std::pair<std::string, std::string_view>> unbundle(const uint8_t* data,
                                                                      size_t size) {
  std::vector<std::pair<std::string, std::string_view>> files;
  size_t at = 0;
  while (at + 2 <= size) {
    const size_t name_size = data[at] | (size_t{data[at + 1]} << 8);
    at += 2;
    if (at + name_size + 4 > size) break;
    std::string name(reinterpret_cast<const char*>(data + at), name_size);
    at += name_size;
    const size_t bytes = data[at] | (size_t{data[at + 1]} << 8) | (size_t{data[at + 2]} << 16) |
                         (size_t{data[at + 3]} << 24);
    at += 4;
    if (bytes > size - at) break;
    const bool plain = !name.empty() && name != "." && name != ".." &&
                       name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
    if (plain) files.emplace_back(std::move(name), std::string_view(reinterpret_cast<const char*>(data + at), bytes));
    at += bytes;
  }
  return files;
}

// Empties the scratch folder and writes `files` into it.
inline void write_files(const std::vector<std::pair<std::string, std::string_view>>& files) {
  for (const auto& entry : std::filesystem::directory_iterator(scratch_dir()))
    std::filesystem::remove_all(entry.path());
  for (const auto& [name, bytes] : files)
    write_input(scratch_dir() / name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace dseek::fuzz
