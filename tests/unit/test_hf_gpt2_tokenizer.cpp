// GPT-2's tokenizer files in a Hugging Face export (runtime/export/hf_gpt2_tokenizer.hpp):
// vocab.json and merges.txt written from r50k_base's ranks, read back by a GPT-2
// tokenizer written independently from the published format and OpenAI's encoder.py
// (tests/reference/gpt2_bpe_reference.mjs, Debian's Node.js), which must give exactly
// dseek's ids on the same text (exact equality, every id); and a model trained on
// another tokenizer gets a note in the folder, not GPT-2's files.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/export/hf_gpt2.hpp"
#include "runtime/export/hf_gpt2_tokenizer.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace ex = dseek::exporting;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

const dseek::model::GptShape kShape{.dim = 16, .layers = 1, .heads = 2, .context = 32,
                                    .vocab = 50257};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("hf export: GPT-2's vocab.json and merges.txt, read by an independent GPT-2 "
          "tokenizer, give dseek's r50k_base ids", "[export][hf][tokenizer]") {
  const auto gpt2 = dseek::data::open_tokenizer("gpt2");  // scripts/install-tokenizers.sh
  const ex::HfTokenizerFiles files = ex::hf_tokenizer_files(gpt2.get(), "", kShape.context);
  CHECK(files.note.empty());
  REQUIRE(files.files.size() == 4);
  dseek::testing::ScratchDir dir("hf-tokenizer");
  const std::vector<float> params(dseek::model::ParamLayout(kShape).total(), 0.01f);
  const fs::path out = dir / "gpt2";
  ex::export_hf_gpt2(kShape, params, out, {.end_of_text = 50256, .files = files.files});
  for (const char* name : {"vocab.json", "merges.txt", "tokenizer_config.json",
                           "special_tokens_map.json", "config.json", "model.safetensors"})
    CHECK(fs::exists(out / name));
  const std::string merges = read_text(out / "merges.txt");
  CHECK(merges.rfind("#version: 0.2\nĠ t\n", 0) == 0);  // GPT-2's first merge
  CHECK(std::count(merges.begin(), merges.end(), '\n') == 1 + 50000);
  CHECK_THAT(read_text(out / "vocab.json"), Contains("\"<|endoftext|>\": 50256"));
  CHECK_THAT(read_text(out / "tokenizer_config.json"), Contains("\"GPT2Tokenizer\""));

  // Contractions, digits, whitespace runs, punctuation, accents, CJK, emoji, code, and
  // three of this repository's pages for bulk.
  std::string text =
      "Hello world! It's 2026; we'll see what they've done... I'm sure you'd agree.\n"
      "   indented\tand\t\ttabbed   \n\n\n  trailing spaces  \n"
      "Ünïcödé café naïve — “quotes” 東京 タワー 😀👍🏽 x²+y³=z\n"
      "def f(x):\n    return [i ** 2 for i in range(x)]  # 12345678901234567890\n";
  for (const char* page : {"README.md", "docs/data.md", "docs/using-the-model.md"})
    text += read_text(dseek::testing::source_dir() / page);
  std::ofstream(dir / "sample.txt", std::ios::binary) << text;
  std::vector<uint32_t> mine;
  gpt2->encode(text, mine);
  auto ran = dseek::testing::run_process(
      {"node", (dseek::testing::source_dir() / "tests/reference/gpt2_bpe_reference.mjs").string(),
       out.string(), (dir / "sample.txt").string()},
      120s);
  INFO(ran.output.substr(0, 2000));
  REQUIRE(ran.exit_code == 0);
  std::vector<uint32_t> reference;
  std::istringstream ids(ran.output);
  for (uint32_t id = 0; ids >> id;) reference.push_back(id);
  WARN("GPT-2 reference tokenizer vs dseek's r50k_base: " << reference.size() << " and "
                                                          << mine.size() << " ids compared");
  REQUIRE(mine.size() > 1000);
  CHECK(reference == mine);
}

TEST_CASE("hf export: a model trained on another tokenizer gets a note, not GPT-2's "
          "tokenizer files", "[export][hf][tokenizer]") {
  const auto bytes = dseek::data::open_tokenizer("bytes");
  const ex::HfTokenizerFiles files = ex::hf_tokenizer_files(bytes.get(), "", kShape.context);
  CHECK_THAT(files.note, Contains("bytes") && Contains("not GPT-2's BPE"));
  REQUIRE(files.files.size() == 1);
  CHECK(files.files[0].name == "TOKENIZER-NOT-INCLUDED.txt");
  const ex::HfTokenizerFiles missing =
      ex::hf_tokenizer_files(nullptr, "data set /x/index.json is gone", kShape.context);
  CHECK_THAT(missing.note, Contains("/x/index.json is gone"));
  REQUIRE(missing.files.size() == 1);
  CHECK(missing.files[0].name == "TOKENIZER-NOT-INCLUDED.txt");
}
