// The shard file format: a 32-byte header (magic "DSEEKTOK", format version, bytes per
// token, token count, reserved) followed by the tokens as uint16 or uint32 little-endian
// (as the index's token dtype says). The
// index's xxHash64 covers the whole file, header included, so any flipped byte is caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/file_io.hpp"

struct XXH64_state_s;

namespace dseek::data {

inline constexpr size_t kShardHeaderBytes = 32;
inline constexpr uint32_t kShardVersion = 1;

constexpr uint64_t shard_file_bytes(uint64_t tokens, TokenDtype dtype) {
  return kShardHeaderBytes + token_bytes(dtype) * tokens;
}

// Checks a shard's bytes against its index entry: size, header, then checksum.
// Throws DataError naming `path` on the first mismatch.
void check_shard(const std::filesystem::path& path, std::span<const unsigned char> file,
                 const ShardEntry& expected, TokenDtype dtype);

// Checks that every token of a shard that passed check_shard is below `vocab_size` (the
// index's): a shard whose checksum and header agree with its index can still hold ids
// the model has no row for. Throws DataError naming `path`, the position and the id.
void check_token_ids(const std::filesystem::path& path, std::span<const unsigned char> file,
                     TokenDtype dtype, uint32_t vocab_size);

// The token bytes of a shard that passed check_shard.
inline const unsigned char* shard_token_bytes(std::span<const unsigned char> file) {
  return file.data() + kShardHeaderBytes;
}

// Writes one shard of a known token count under a temporary name and renames it into
// place on finish(), so a shard under its final name is always complete.
class ShardWriter {
 public:
  ShardWriter(const std::filesystem::path& dir, std::string file_name, uint64_t tokens,
              TokenDtype dtype);
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  ~ShardWriter();  // removes the temporary file unless finished

  // Appends `count` tokens, at most remaining(); each must fit the dtype.
  void append_tokens(const uint32_t* tokens, size_t count);
  uint64_t remaining() const { return planned_ - written_; }
  // Flushes, syncs and renames the shard; returns its index entry.
  ShardEntry finish();

 private:
  void flush();

  std::filesystem::path final_path_;
  std::filesystem::path temp_path_;
  std::string file_name_;
  io::OutputFile file_;
  std::unique_ptr<XXH64_state_s, void (*)(XXH64_state_s*)> hash_;
  std::vector<unsigned char> buffer_;
  TokenDtype dtype_;
  uint64_t planned_;
  uint64_t written_ = 0;
  bool finished_ = false;
};

}  // namespace dseek::data
