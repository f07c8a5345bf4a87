// Reading a prepared data set (see token_dataset.hpp): the index says which shards
// make up a split; each is mapped and checked once at open, then read in place.
#include "runtime/data/token_dataset.hpp"

#include <algorithm>
#include <utility>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/mapped_file.hpp"
#include "runtime/data/shard_file.hpp"

namespace dseek::data {

struct TokenDataset::Impl {
  std::filesystem::path dir;
  Split split = Split::train;
  uint32_t vocab_size = 0;
  std::string tokenizer, tokenizer_sha256;
  TokenDtype dtype = TokenDtype::uint16_le;
  std::vector<MappedFile> shards;
  std::vector<uint64_t> first_token;  // of each shard in the split, plus the total
};

TokenDataset::TokenDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TokenDataset::TokenDataset(TokenDataset&&) noexcept = default;
TokenDataset& TokenDataset::operator=(TokenDataset&&) noexcept = default;
TokenDataset::~TokenDataset() = default;

TokenDataset TokenDataset::open(const std::filesystem::path& dir, Split split) {
  DatasetIndex index = read_dataset_index(dir);
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->split = split;
  impl->vocab_size = index.vocab_size;
  impl->tokenizer = index.tokenizer;
  impl->tokenizer_sha256 = index.tokenizer_sha256;
  impl->dtype = index.token_dtype;
  impl->first_token.push_back(0);
  for (const ShardEntry& entry : index.split(split).shards) {
    MappedFile file = MappedFile::open(dir / entry.file_name);
    check_shard(file.path(), file.bytes(), entry, index.token_dtype);
    check_token_ids(file.path(), file.bytes(), index.token_dtype, index.vocab_size);
    impl->shards.push_back(std::move(file));
    impl->first_token.push_back(impl->first_token.back() + entry.tokens);
  }
  return TokenDataset(std::move(impl));
}

uint64_t TokenDataset::num_tokens() const { return impl_->first_token.back(); }

uint32_t TokenDataset::vocab_size() const { return impl_->vocab_size; }
const std::string& TokenDataset::tokenizer() const { return impl_->tokenizer; }
const std::string& TokenDataset::tokenizer_sha256() const { return impl_->tokenizer_sha256; }
const std::filesystem::path& TokenDataset::dir() const { return impl_->dir; }

void TokenDataset::read(uint64_t start, uint64_t count, int32_t* out) const {
  const uint64_t total = num_tokens();
  if (start > total || count > total - start) {
    throw DataError("read of tokens [" + std::to_string(start) + ", +" + std::to_string(count) +
                    ") past the end of the " +
                    (impl_->split == Split::train ? "train" : "validation") + " split of " +
                    impl_->dir.string() + " (" + std::to_string(total) + " tokens)");
  }
  // The shard holding `start`: the last one that begins at or before it.
  size_t shard = static_cast<size_t>(
      std::upper_bound(impl_->first_token.begin(), impl_->first_token.end(), start) -
      impl_->first_token.begin() - 1);
  while (count > 0) {
    uint64_t offset = start - impl_->first_token[shard];
    uint64_t take = std::min(count, impl_->first_token[shard + 1] - start);
    const unsigned char* in = shard_token_bytes(impl_->shards[shard].bytes());
    if (impl_->dtype == TokenDtype::uint16_le) {
      in += 2 * offset;
      for (uint64_t i = 0; i < take; ++i) {
        out[i] = static_cast<int32_t>(in[2 * i] | (in[2 * i + 1] << 8));  // little-endian
      }
    } else {
      in += 4 * offset;
      for (uint64_t i = 0; i < take; ++i) {
        out[i] = static_cast<int32_t>(uint32_t{in[4 * i]} | (uint32_t{in[4 * i + 1]} << 8) |
                                      (uint32_t{in[4 * i + 2]} << 16) |
                                      (uint32_t{in[4 * i + 3]} << 24));
      }
    }
    out += take;
    start += take;
    count -= take;
    ++shard;
  }
}

}  // namespace dseek::data
