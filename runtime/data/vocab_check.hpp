// The check that a model can train on a prepared data set: every id of the data set's
// tokenizer must be an id of the model's vocabulary (model.vocab may be larger: padding,
// as llm.c pads GPT-2's 50257 to 50304; padded ids never appear in the data).
#pragma once

#include <cstdint>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

// Throws DataError naming the data set's index, its tokenizer (and rank file hash) and
// both vocabularies when data.vocab_size() > model_vocab.
void check_model_vocab(const TokenDataset& data, int64_t model_vocab);

}  // namespace dseek::data
