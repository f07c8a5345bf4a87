// A SentencePiece model (a .model file, as Llama, T5 and others ship) as a tokenizer of
// prepared data sets, through libsentencepiece: its normalization and segmentation,
// ids from 0 to its piece count; documents are separated by its </s> (eos) piece.
#pragma once

#include <filesystem>
#include <memory>

#include "runtime/data/tokenizer.hpp"

namespace dseek::data {

// Loads `model`; throws DataError naming it when it cannot be read or loaded, or has no
// eos piece.
std::unique_ptr<Tokenizer> open_sentencepiece(const std::filesystem::path& model);

}  // namespace dseek::data
