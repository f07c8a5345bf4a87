// Writing a split as a sequence of shards (see split_writer.hpp).
#include "runtime/data/split_writer.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

SplitWriter::SplitWriter(std::filesystem::path dir, std::string prefix, uint64_t total_tokens,
                         uint64_t shard_tokens, TokenDtype dtype, uint32_t separator)
    : dir_(std::move(dir)),
      prefix_(std::move(prefix)),
      total_tokens_(total_tokens),
      shard_tokens_(shard_tokens),
      dtype_(dtype),
      separator_(separator) {
  if (shard_tokens_ == 0) throw DataError("shard size must be at least one token");
}

ShardWriter& SplitWriter::current() {
  if (shard_ && shard_->remaining() == 0) close_current();
  if (!shard_) {
    if (planned_ == total_tokens_) {
      throw DataError("internal error: more tokens than planned for the " + prefix_ + " split");
    }
    char name[64];
    std::snprintf(name, sizeof name, "%s-%05zu.tok", prefix_.c_str(), entry_.shards.size());
    uint64_t tokens = std::min(shard_tokens_, total_tokens_ - planned_);
    planned_ += tokens;
    shard_.emplace(dir_, name, tokens, dtype_);
  }
  return *shard_;
}

void SplitWriter::close_current() {
  entry_.shards.push_back(shard_->finish());
  entry_.tokens += entry_.shards.back().tokens;
  shard_.reset();
}

void SplitWriter::append_document(const uint32_t* tokens, size_t count) {
  if (entry_.documents > 0) current().append_tokens(&separator_, 1);
  while (count > 0) {
    ShardWriter& shard = current();
    size_t take = static_cast<size_t>(std::min<uint64_t>(count, shard.remaining()));
    shard.append_tokens(tokens, take);
    tokens += take;
    count -= take;
  }
  ++entry_.documents;
}

SplitEntry SplitWriter::finish() {
  if (shard_) close_current();
  if (entry_.tokens != total_tokens_) {
    throw DataError("internal error: the " + prefix_ + " split got " +
                    std::to_string(entry_.tokens) + " of " + std::to_string(total_tokens_) +
                    " planned tokens");
  }
  return std::move(entry_);
}

}  // namespace dseek::data
