// Writing and checking shard files (format in shard_file.hpp).
#include "runtime/data/shard_file.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <system_error>
#include <utility>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {

constexpr std::string_view kMagic = "DSEEKTOK";
constexpr size_t kBufferBytes = 1 << 20;

void put_u32(unsigned char* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}
void put_u64(unsigned char* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}
uint32_t get_u32(const unsigned char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{in[i]} << (8 * i);
  return value;
}
uint64_t get_u64(const unsigned char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{in[i]} << (8 * i);
  return value;
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

void free_state(XXH64_state_s* state) { XXH64_freeState(state); }

}  // namespace

void check_shard(const std::filesystem::path& path, std::span<const unsigned char> file,
                 const ShardEntry& expected, TokenDtype dtype) {
  const std::string name = path.string();
  if (file.size() != expected.bytes) {
    throw DataError("shard " + name + " has " + std::to_string(file.size()) +
                    " bytes, the index says " + std::to_string(expected.bytes) +
                    (file.size() < expected.bytes ? " (truncated)" : ""));
  }
  if (file.size() < kShardHeaderBytes ||
      std::memcmp(file.data(), kMagic.data(), kMagic.size()) != 0) {
    throw DataError("shard " + name + " has a bad magic: not a dseek token shard");
  }
  const unsigned char* header = file.data();
  if (uint32_t version = get_u32(header + 8); version != kShardVersion) {
    throw DataError("shard " + name + " has format version " + std::to_string(version) +
                    ", expected " + std::to_string(kShardVersion));
  }
  if (uint32_t width = get_u32(header + 12); width != token_bytes(dtype)) {
    throw DataError("shard " + name + " stores " + std::to_string(width) +
                    "-byte tokens, expected " + std::to_string(token_bytes(dtype)));
  }
  if (uint64_t tokens = get_u64(header + 16); tokens != expected.tokens) {
    throw DataError("shard " + name + " header says " + std::to_string(tokens) +
                    " tokens, the index says " + std::to_string(expected.tokens));
  }
  if (uint64_t hash = XXH64(file.data(), file.size(), 0); hash != expected.xxhash64) {
    throw DataError("shard " + name + " is corrupt: xxHash64 " + hex(hash) +
                    ", the index says " + hex(expected.xxhash64));
  }
}

void check_token_ids(const std::filesystem::path& path, std::span<const unsigned char> file,
                     TokenDtype dtype, uint32_t vocab_size) {
  const unsigned char* tokens = file.data() + kShardHeaderBytes;
  const size_t count = (file.size() - kShardHeaderBytes) / token_bytes(dtype);
  uint32_t largest = 0;
  if (dtype == TokenDtype::uint16_le) {
    if (vocab_size > 0xFFFF) return;  // every uint16 is an id
    for (size_t i = 0; i < count; ++i)
      largest = std::max<uint32_t>(largest, tokens[2 * i] | (tokens[2 * i + 1] << 8));
  } else {
    for (size_t i = 0; i < count; ++i) largest = std::max(largest, get_u32(tokens + 4 * i));
  }
  if (largest < vocab_size) return;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t id = dtype == TokenDtype::uint16_le
                            ? uint32_t{tokens[2 * i]} | (uint32_t{tokens[2 * i + 1]} << 8)
                            : get_u32(tokens + 4 * i);
    if (id >= vocab_size)
      throw DataError("shard " + path.string() + ": token " + std::to_string(i) + " is id " +
                      std::to_string(id) + ", outside the data set's vocabulary of " +
                      std::to_string(vocab_size));
  }
}

ShardWriter::ShardWriter(const std::filesystem::path& dir, std::string file_name,
                         uint64_t tokens, TokenDtype dtype)
    : final_path_(dir / file_name),
      temp_path_(dir / ("." + file_name + ".tmp")),
      file_name_(std::move(file_name)),
      file_(temp_path_),
      hash_(XXH64_createState(), &free_state),
      dtype_(dtype),
      planned_(tokens) {
  if (!hash_ || XXH64_reset(hash_.get(), 0) != XXH_OK) {
    throw DataError("cannot start the checksum of " + final_path_.string());
  }
  buffer_.reserve(kBufferBytes);
  buffer_.resize(kShardHeaderBytes);
  unsigned char* header = buffer_.data();
  std::memcpy(header, kMagic.data(), kMagic.size());
  put_u32(header + 8, kShardVersion);
  put_u32(header + 12, token_bytes(dtype_));
  put_u64(header + 16, planned_);
  put_u64(header + 24, 0);
}

ShardWriter::~ShardWriter() {
  if (!finished_) {
    std::error_code ignored;
    std::filesystem::remove(temp_path_, ignored);
  }
}

void ShardWriter::append_tokens(const uint32_t* tokens, size_t count) {
  if (count > remaining()) {
    throw DataError("internal error: more tokens than planned for " + final_path_.string());
  }
  const size_t width = token_bytes(dtype_);
  while (count > 0) {
    if (buffer_.size() + width > kBufferBytes) flush();
    size_t room = (kBufferBytes - buffer_.size()) / width;
    size_t take = count < room ? count : room;
    size_t used = buffer_.size();
    buffer_.resize(used + take * width);
    unsigned char* out = buffer_.data() + used;
    if (dtype_ == TokenDtype::uint16_le) {
      for (size_t i = 0; i < take; ++i) {
        if (tokens[i] > 0xffff) {
          throw DataError("internal error: token " + std::to_string(tokens[i]) +
                          " does not fit the uint16 shard " + final_path_.string());
        }
        out[2 * i] = static_cast<unsigned char>(tokens[i]);
        out[2 * i + 1] = static_cast<unsigned char>(tokens[i] >> 8);
      }
    } else {
      for (size_t i = 0; i < take; ++i) put_u32(out + 4 * i, tokens[i]);
    }
    tokens += take;
    count -= take;
    written_ += take;
  }
}

void ShardWriter::flush() {
  if (buffer_.empty()) return;
  XXH64_update(hash_.get(), buffer_.data(), buffer_.size());
  file_.write(buffer_.data(), buffer_.size());
  buffer_.clear();
}

ShardEntry ShardWriter::finish() {
  if (written_ != planned_) {
    throw DataError("internal error: " + final_path_.string() + " got " +
                    std::to_string(written_) + " of " + std::to_string(planned_) + " tokens");
  }
  flush();
  file_.sync_and_close();
  io::rename_file(temp_path_, final_path_);
  finished_ = true;
  return ShardEntry{file_name_, planned_, shard_file_bytes(planned_, dtype_),
                    XXH64_digest(hash_.get())};
}

}  // namespace dseek::data
