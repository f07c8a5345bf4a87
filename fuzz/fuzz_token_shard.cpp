// libFuzzer target: the token shard reader (TokenDataset::open and read, check_shard) on
// arbitrary bytes as a data set's one train shard, under an index that agrees with the
// file (its size, the token count of its header, its xxHash64: what a writer that is
// wrong, or an attacker, writes), so that the reader's own checks are what stands
// between the bytes and training: the header, the size against the token count, every
// id against the vocabulary. The index is written by write_dataset_index for the byte
// tokenizer (uint16 tokens), or cl100k_base (uint32) when the header says 4-byte tokens.
// A DataError is the expected answer to bad input; anything else is a bug, as is an id
// read back that the vocabulary does not have.
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_files.hpp"
#include "runtime/data/dataset_index.hpp"
#include "runtime/data/shard_file.hpp"
#include "runtime/data/token_dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace d = dseek::data;
  const auto& dir = dseek::fuzz::scratch_dir();
  uint64_t header_tokens = 0;
  for (int i = 0; i < 8 && 16 + i < static_cast<int>(size); ++i)
    header_tokens |= uint64_t{data[16 + i]} << (8 * i);
  const bool wide = size >= 16 && data[12] == 4;
  d::DatasetIndex index;
  index.tokenizer = wide ? "cl100k_base" : "bytes";
  index.vocab_size = wide ? 100277 : 256;
  index.token_dtype = wide ? d::TokenDtype::uint32_le : d::TokenDtype::uint16_le;
  index.source_dir = "fuzz";
  index.train.documents = 1;
  index.train.tokens = header_tokens;
  index.train.shards.push_back({"train-00000.bin", header_tokens, size, XXH64(data, size, 0)});
  try {
    d::write_dataset_index(dir, index);
  } catch (const d::DataError&) {
    return 0;  // an index the writer refuses (a token count no file of this size holds)
  }
  dseek::fuzz::write_input(dir / "train-00000.bin", data, size);
  try {
    const auto dataset = d::TokenDataset::open(dir, d::Split::train);
    std::vector<int32_t> tokens(std::min<uint64_t>(dataset.num_tokens(), 1 << 16));
    dataset.read(0, tokens.size(), tokens.data());
    for (int32_t id : tokens)
      if (id < 0 || static_cast<uint32_t>(id) >= dataset.vocab_size()) std::abort();
  } catch (const d::DataError&) {
  }
  return 0;
}
