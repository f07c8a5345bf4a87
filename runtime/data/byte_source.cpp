// Plain, gzip (zlib) and zstd (libzstd) byte sources (see byte_source.hpp). Several
// gzip members or zstd frames one after another are read as one stream, as gzip -d
// and zstd -d do.
#include "runtime/data/byte_source.hpp"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/data/file_io.hpp"

namespace dseek::data {
namespace {

constexpr size_t kChunk = 1 << 17;

class File {
 public:
  explicit File(const std::filesystem::path& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) throw DataError("cannot open " + io::describe_errno(path, errno));
  }
  ~File() { std::fclose(file_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  size_t read(char* out, size_t capacity) {
    size_t got = std::fread(out, 1, capacity, file_);
    if (got == 0 && std::ferror(file_)) {
      throw DataError("cannot read " + io::describe_errno(path_, errno));
    }
    return got;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

class PlainSource final : public ByteSource {
 public:
  PlainSource(std::unique_ptr<File> file, std::string head)
      : file_(std::move(file)), head_(std::move(head)) {}
  size_t read(char* out, size_t capacity) override {
    if (head_used_ < head_.size()) {
      size_t take = std::min(capacity, head_.size() - head_used_);
      std::memcpy(out, head_.data() + head_used_, take);
      head_used_ += take;
      return take;
    }
    return file_->read(out, capacity);
  }

 private:
  std::unique_ptr<File> file_;
  std::string head_;  // the bytes read to look for a magic
  size_t head_used_ = 0;
};

class GzipSource final : public ByteSource {
 public:
  GzipSource(std::unique_ptr<File> file, std::string head)
      : file_(std::move(file)), input_(std::move(head)) {
    std::memset(&stream_, 0, sizeof stream_);
    if (inflateInit2(&stream_, 15 + 16) != Z_OK) {
      throw DataError("cannot start gzip decompression of " + file_->path().string());
    }
    stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
    stream_.avail_in = static_cast<uInt>(input_.size());
  }
  ~GzipSource() override { inflateEnd(&stream_); }
  size_t read(char* out, size_t capacity) override {
    stream_.next_out = reinterpret_cast<Bytef*>(out);
    stream_.avail_out = static_cast<uInt>(capacity);
    while (stream_.avail_out == capacity) {
      if (stream_.avail_in == 0 && !refill()) {
        if (in_member_) throw DamagedInput("truncated gzip file " + file_->path().string());
        return 0;
      }
      if (!in_member_) {  // the next member starts: a new header
        inflateReset(&stream_);
        in_member_ = true;
      }
      const int status = inflate(&stream_, Z_NO_FLUSH);
      if (status == Z_STREAM_END) {
        in_member_ = false;
      } else if (status != Z_OK && status != Z_BUF_ERROR) {
        throw DamagedInput("corrupt gzip file " + file_->path().string() + ": " +
                           (stream_.msg ? stream_.msg : "inflate failed"));
      }
    }
    return capacity - stream_.avail_out;
  }

 private:
  bool refill() {
    input_.resize(kChunk);
    const size_t got = file_->read(input_.data(), input_.size());
    input_.resize(got);
    stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
    stream_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }

  std::unique_ptr<File> file_;
  std::string input_;
  z_stream stream_;
  bool in_member_ = true;
};

class ZstdSource final : public ByteSource {
 public:
  ZstdSource(std::unique_ptr<File> file, std::string head)
      : file_(std::move(file)), input_(std::move(head)), stream_(ZSTD_createDStream()) {
    if (stream_ == nullptr) {
      throw DataError("cannot start zstd decompression of " + file_->path().string());
    }
    in_ = {input_.data(), input_.size(), 0};
  }
  ~ZstdSource() override { ZSTD_freeDStream(stream_); }
  size_t read(char* out, size_t capacity) override {
    ZSTD_outBuffer output{out, capacity, 0};
    while (output.pos == 0) {
      if (in_.pos == in_.size && !refill()) {
        if (in_frame_) throw DamagedInput("truncated zstd file " + file_->path().string());
        return 0;
      }
      const size_t status = ZSTD_decompressStream(stream_, &output, &in_);
      if (ZSTD_isError(status)) {
        throw DamagedInput("corrupt zstd file " + file_->path().string() + ": " +
                           ZSTD_getErrorName(status));
      }
      in_frame_ = status != 0;  // 0: a frame ended here
    }
    return output.pos;
  }

 private:
  bool refill() {
    input_.resize(kChunk);
    const size_t got = file_->read(input_.data(), input_.size());
    input_.resize(got);
    in_ = {input_.data(), input_.size(), 0};
    return got > 0;
  }

  std::unique_ptr<File> file_;
  std::string input_;
  ZSTD_DStream* stream_;
  ZSTD_inBuffer in_;
  bool in_frame_ = true;
};

}  // namespace

std::unique_ptr<ByteSource> open_byte_source(const std::filesystem::path& path,
                                             Compression& compression) {
  auto file = std::make_unique<File>(path);
  std::string head(4, '\0');
  size_t got = 0;
  while (got < head.size()) {
    size_t n = file->read(head.data() + got, head.size() - got);
    if (n == 0) break;
    got += n;
  }
  head.resize(got);
  if (head.size() >= 2 && head[0] == '\x1f' && head[1] == '\x8b') {
    compression = Compression::gzip;
    return std::make_unique<GzipSource>(std::move(file), std::move(head));
  }
  if (head == std::string("\x28\xb5\x2f\xfd", 4)) {
    compression = Compression::zstd;
    return std::make_unique<ZstdSource>(std::move(file), std::move(head));
  }
  compression = Compression::none;
  return std::make_unique<PlainSource>(std::move(file), std::move(head));
}

std::string uncompressed_name(const std::string& name, Compression compression) {
  if (compression == Compression::none) return name;
  for (const char* suffix : {".gz", ".zst", ".zstd"}) {
    if (name.ends_with(suffix)) return name.substr(0, name.size() - std::strlen(suffix));
  }
  return name;
}

}  // namespace dseek::data
