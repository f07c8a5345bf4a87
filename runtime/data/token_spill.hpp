// The tokens of `dseek data prepare`'s first pass, kept in a temporary file (uint32,
// native order) until the split is known: appended to, cut back to a mark when an
// input file turns out damaged, then mapped for the second pass.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace dseek::data {

class TokenSpill {
 public:
  explicit TokenSpill(std::filesystem::path path);  // creates (truncates) the file
  ~TokenSpill();                                    // closes and removes it
  TokenSpill(const TokenSpill&) = delete;
  TokenSpill& operator=(const TokenSpill&) = delete;

  void append(const uint32_t* tokens, size_t count);
  uint64_t size() const { return flushed_ + buffer_.size(); }  // tokens appended
  // Drops every token appended after the first `tokens`.
  void truncate(uint64_t tokens);
  // Flushes; the file then holds size() tokens.
  void finish();
  const std::filesystem::path& path() const { return path_; }

 private:
  void flush();

  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<uint32_t> buffer_;
  uint64_t flushed_ = 0;
};

}  // namespace dseek::data
