// The vocabulary check of vocab_check.hpp.
#include "runtime/data/vocab_check.hpp"

#include <string>

#include "runtime/data/dataset_index.hpp"

namespace dseek::data {

void check_model_vocab(const TokenDataset& data, int64_t model_vocab) {
  if (model_vocab >= static_cast<int64_t>(data.vocab_size())) return;
  std::string tokenizer = data.tokenizer();
  if (!data.tokenizer_sha256().empty()) {
    tokenizer += " (rank file SHA-256 " + data.tokenizer_sha256() + ")";
  }
  throw DataError("the data set " + data.dir().string() + " (index " +
                  (data.dir() / kIndexFileName).string() + ") was tokenized with " + tokenizer +
                  ", vocabulary " + std::to_string(data.vocab_size()) +
                  ", which does not fit model.vocab = " + std::to_string(model_vocab) +
                  ": set model.vocab to at least " + std::to_string(data.vocab_size()) +
                  " (a multiple of 64 such as " +
                  std::to_string((data.vocab_size() + 63) / 64 * 64) +
                  " pads it), or prepare the data with a tokenizer that fits");
}

}  // namespace dseek::data
