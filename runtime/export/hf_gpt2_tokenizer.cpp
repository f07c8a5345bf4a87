// The GPT-2 tokenizer files of a Hugging Face folder; see hf_gpt2_tokenizer.hpp.
#include "runtime/export/hf_gpt2_tokenizer.hpp"

#include <array>

#include "runtime/checkpoint/error.hpp"
#include "runtime/data/file_io.hpp"
#include "runtime/data/tokenizer_specs.hpp"

namespace dseek::exporting {

namespace {

using checkpoint::CheckpointError;
constexpr const char* kNoteFile = "TOKENIZER-NOT-INCLUDED.txt";

// OpenAI's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68
// bytes for U+0100 onwards in byte order. Each entry is the code point's UTF-8.
const std::array<std::string, 256>& byte_alphabet() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    unsigned next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const unsigned cp = printable ? b : next++;
      if (cp < 0x80) {
        t[b] = std::string(1, static_cast<char>(cp));
      } else {
        t[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
    }
    return t;
  }();
  return table;
}

std::string in_alphabet(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += byte_alphabet()[static_cast<unsigned char>(c)];
  return out;
}

// A JSON string: the alphabet has no control characters, only " and \ need escapes.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The two tokens that token `rank` is merged from: BPE over its bytes with the ranks
// below it (the lowest-ranked adjacent pair first, as tiktoken merges).
std::pair<uint32_t, uint32_t> merge_of(const data::BpeRanks& ranks, uint32_t rank) {
  const std::string_view bytes = ranks.bytes_of(rank);
  std::vector<uint32_t> parts;
  for (char c : bytes) parts.push_back(ranks.byte_rank(static_cast<unsigned char>(c)));
  for (;;) {
    size_t best = parts.size();
    uint32_t best_rank = rank;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const uint32_t merged = ranks.merged(parts[i], parts[i + 1]);
      if (merged < best_rank) {
        best_rank = merged;
        best = i;
      }
    }
    if (best == parts.size()) break;
    parts[best] = best_rank;
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  if (parts.size() != 2)
    throw CheckpointError("r50k_base token " + std::to_string(rank) + " (" +
                          json_string(in_alphabet(bytes)) + ") is not one merge of two " +
                          "lower-ranked tokens (" + std::to_string(parts.size()) +
                          " parts): no GPT-2 merges.txt can express it");
  return {parts[0], parts[1]};
}

}  // namespace

std::vector<FolderFile> gpt2_tokenizer_files(const data::BpeRanks& ranks, int64_t context) {
  const data::EncodingSpec& spec = data::kEncodings[0];  // r50k_base
  if (ranks.size() != spec.mergeable)
    throw CheckpointError("r50k_base has " + std::to_string(spec.mergeable) +
                          " mergeable tokens, the rank file " + std::to_string(ranks.size()));
  for (uint32_t r = 0; r < 256; ++r)
    if (ranks.bytes_of(r).size() != 1)
      throw CheckpointError("r50k_base token " + std::to_string(r) +
                            " is not a single byte: GPT-2's first 256 ids are the bytes");
  std::string vocab = "{";
  for (uint32_t r = 0; r < ranks.size(); ++r)
    vocab += (r ? ", " : "") + json_string(in_alphabet(ranks.bytes_of(r))) + ": " +
             std::to_string(r);
  for (const data::SpecialToken& special : spec.specials)
    vocab += ", " + json_string(special.text) + ": " + std::to_string(special.id);
  vocab += "}\n";
  std::string merges = "#version: 0.2\n";
  for (uint32_t r = 256; r < ranks.size(); ++r) {
    const auto [left, right] = merge_of(ranks, r);
    merges += in_alphabet(ranks.bytes_of(left)) + " " + in_alphabet(ranks.bytes_of(right)) + "\n";
  }
  const std::string eot = json_string(spec.specials[0].text);
  const std::string specials = "  \"bos_token\": " + eot + ",\n  \"eos_token\": " + eot +
                               ",\n  \"unk_token\": " + eot;
  const std::string config = "{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n"
                             "  \"add_prefix_space\": false,\n  \"add_bos_token\": false,\n"
                             "  \"errors\": \"replace\",\n  \"model_max_length\": " +
                             std::to_string(context) + ",\n" + specials + "\n}\n";
  return {{"vocab.json", vocab},
          {"merges.txt", merges},
          {"tokenizer_config.json", config},
          {"special_tokens_map.json", "{\n" + specials + "\n}\n"}};
}

HfTokenizerFiles hf_tokenizer_files(const data::Tokenizer* tokenizer, const std::string& why,
                                    int64_t context) {
  std::string reason;
  if (tokenizer == nullptr) {
    reason = "the checkpoint's tokenizer could not be opened (" + why + ")";
  } else if (tokenizer->kind() != data::TokenizerKind::r50k_base) {
    reason = std::string("the model was trained on tokenizer ") + tokenizer->name() +
             (tokenizer->kind() == data::TokenizerKind::bytes
                  ? " (one id per byte value, 256 ids)"
                  : tokenizer->file().empty() ? "" : " (" + tokenizer->file().string() + ")") +
             ", which is not GPT-2's BPE (r50k_base)";
  } else {
    std::vector<char> bytes;
    std::string error;
    if (!data::io::read_file(tokenizer->file(), bytes, error))
      throw CheckpointError("cannot read the r50k_base rank file " + error);
    const auto ranks = data::BpeRanks::parse(std::string_view(bytes.data(), bytes.size()),
                                             tokenizer->file().string());
    return {gpt2_tokenizer_files(ranks, context), ""};
  }
  const std::string consequence =
      tokenizer == nullptr
          ? ", so which ids the model learned is not known here and no tokenizer files are "
            "written (they could be wrong); export again where the checkpoint's data set "
            "and rank files are"
          : ". GPT2Tokenizer would give other ids than the model was trained on; encode and "
            "decode text with dseek's tokenizer (dseek generate), or train on data prepared "
            "with --tokenizer gpt2 to get GPT-2's tokenizer files here";
  const std::string note = "no Hugging Face tokenizer files (vocab.json, merges.txt) in this "
                           "folder: " + reason + consequence + ".";
  return {{{kNoteFile, note + "\n"}}, note};
}

}  // namespace dseek::exporting
