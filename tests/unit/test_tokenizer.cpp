// Unit tests of the tokenizers: the pre-tokenizers' pieces (expected pieces are what
// JavaScript's regexes, js-tiktoken's engine, cut these strings into), WHATWG UTF-8
// repair, known ids of both encodings, decode(encode(text)) == text, and the checks
// of the rank files (SHA-256, unknown files). Needs the rank files that
// scripts/install-tokenizers.sh installs. The comparison of every id with js-tiktoken
// on a large corpus is tests/integration/test_tokenizer_reference.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/data/bpe_ranks.hpp"
#include "runtime/data/bpe_tokenizer.hpp"
#include "runtime/data/pretokenizer.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/tokenizer.hpp"
#include "runtime/data/utf8_repair.hpp"
#include "support/data_test_files.hpp"
#include "support/scoped_env.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;
using dseek::data::DataError;
using dseek::data::PreTokenizer;
using dseek::testing::ScratchDir;
namespace data = dseek::data;
using dseek::testing::ScopedEnv;

using dseek::testing::data_error_of;

namespace {

std::vector<std::string> pieces(PreTokenizer kind, const std::string& text) {
  std::vector<std::string> out;
  data::for_each_piece(kind, text, [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

std::vector<uint32_t> encode(const data::Tokenizer& tokenizer, const std::string& text) {
  std::vector<uint32_t> ids;
  tokenizer.encode(text, ids);
  return ids;
}


}  // namespace

TEST_CASE("r50k_base pre-tokenizer cuts text as GPT-2's regex does", "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(pieces(PreTokenizer::r50k, "Hello, y'all! I'M here   now\n\n\n1234567 x") ==
        V{"Hello", ",", " y", "'", "all", "!", " I", "'", "M", " here", "  ", " now", "\n\n",
          "\n", "1234567", " x"});
  CHECK(pieces(PreTokenizer::r50k, "  a\t\tb \n\n c'S'LL'Re'd'x 'll") ==
        V{" ", " a", "\t", "\t", "b", " \n\n", " c", "'", "S", "'", "LL", "'", "Re", "'d", "'",
          "x", " '", "ll"});
  // U+00A0, U+3000 and U+FEFF are white space (\s of JavaScript).
  CHECK(pieces(PreTokenizer::r50k, "\u00a0\u3000x\ufeff\ufeffy\r\n\r\n  \r\n z") ==
        V{"\u00a0", "\u3000", "x", "\ufeff", "\ufeff", "y", "\r\n\r\n  \r\n", " z"});
  CHECK(pieces(PreTokenizer::r50k, "\u4e2d\u6587 \U0001F600\U0001F44D!? (word) $12.50\n") ==
        V{"\u4e2d\u6587", " \U0001F600\U0001F44D!?", " (", "word", ")", " $", "12", ".", "50",
          "\n"});
}

TEST_CASE("cl100k_base pre-tokenizer cuts text as its regex does", "[tokenizer]") {
  using V = std::vector<std::string>;
  // Contractions in any case, digits by three, newlines kept together.
  CHECK(pieces(PreTokenizer::cl100k, "Hello, y'all! I'M here   now\n\n\n1234567 x") ==
        V{"Hello", ",", " y", "'all", "!", " I", "'M", " here", "  ", " now", "\n\n\n", "123",
          "456", "7", " x"});
  CHECK(pieces(PreTokenizer::cl100k, "  a\t\tb \n\n c'S'LL'Re'd'x 'll") ==
        V{" ", " a", "\t", "\tb", " \n\n", " c", "'S", "'LL", "'Re", "'d", "'x", " '", "ll"});
  CHECK(pieces(PreTokenizer::cl100k, "\u00a0\u3000x\ufeff\ufeffy\r\n\r\n  \r\n z") ==
        V{"\u00a0", "\u3000x", "\ufeff", "\ufeffy", "\r\n\r\n  \r\n", " z"});
  CHECK(pieces(PreTokenizer::cl100k, "\u4e2d\u6587 \U0001F600\U0001F44D!? (word) $12.50\n") ==
        V{"\u4e2d\u6587", " \U0001F600\U0001F44D!?", " (", "word", ")", " $", "12", ".", "50",
          "\n"});
}

TEST_CASE("UTF-8 repair replaces each maximal invalid subsequence by one U+FFFD", "[tokenizer]") {
  const std::string bad = "\xEF\xBF\xBD";
  std::string out;
  struct Case {
    std::string in, out;
    size_t replaced;
  };
  for (const Case& c : std::vector<Case>{
           {"plain \xE2\x82\xAC ok", "plain \xE2\x82\xAC ok", 0},
           {"\xC3", bad, 1},                           // truncated at the end
           {"\xC3(", bad + "(", 1},                    // truncated before ASCII
           {"\xF0\x9F\x98", bad, 1},                   // a 4-byte start missing its last
           {"\xED\xA0\x80", bad + bad + bad, 3},       // an encoded surrogate
           {"\xC0\xAF", bad + bad, 2},                 // overlong
           {"\xF4\x90\x80\x80", bad + bad + bad + bad, 4},  // above U+10FFFF
           {"\x80\xFF", bad + bad, 2},                 // lone continuation, never-valid byte
           {"a\xE2\x82z", "a" + bad + "z", 1}}) {
    INFO(c.out);
    CHECK(data::utf8::repair(c.in, out) == c.replaced);
    CHECK(out == c.out);
    CHECK(data::utf8::is_valid(out));
    CHECK(data::utf8::is_valid(c.in) == (c.replaced == 0));
  }
}

TEST_CASE("the BPE encodings give tiktoken's ids and decode back", "[tokenizer]") {
  const auto gpt2 = data::open_tokenizer("gpt2");
  const auto r50k = data::open_tokenizer("r50k_base");
  const auto cl100k = data::open_tokenizer("cl100k_base");
  CHECK(gpt2->kind() == data::TokenizerKind::r50k_base);
  CHECK(std::string(gpt2->name()) == "r50k_base");
  CHECK(gpt2->vocab_size() == 50257);
  CHECK(gpt2->separator() == 50256);  // <|endoftext|>
  CHECK(cl100k->vocab_size() == 100277);
  CHECK(cl100k->separator() == 100257);
  // Ids from js-tiktoken (and tiktoken's documentation for "hello world").
  CHECK(encode(*r50k, "hello world") == std::vector<uint32_t>{31373, 995});
  CHECK(encode(*cl100k, "hello world") == std::vector<uint32_t>{15339, 1917});
  CHECK(encode(*r50k, " 'S'Ll 12345 \xEF\xBB\xBF  x\n\n\ty") ==
        std::vector<uint32_t>{705, 50, 6, 43, 75, 17031, 2231, 27332, 119, 123, 220, 2124, 628,
                              197, 88});
  CHECK(encode(*cl100k, " 'S'Ll 12345 \xEF\xBB\xBF  x\n\n\ty") ==
        std::vector<uint32_t>{364, 50, 92526, 75, 220, 4513, 1774, 76880, 220, 865, 271, 14862});
  // Invalid UTF-8 is repaired first: three U+FFFD, '(' and one more U+FFFD.
  CHECK(encode(*r50k, "\xED\xA0\x80\xC3(\xF0\x9F\x98") == std::vector<uint32_t>{12100, 7, 4210});
  CHECK(encode(*cl100k, "\xED\xA0\x80\xC3(\xF0\x9F\x98") == std::vector<uint32_t>{24378, 7, 5809});
  // The special token's text is ordinary text when encoding.
  CHECK(encode(*r50k, "<|endoftext|>").size() > 1);

  std::mt19937 rng(7);
  for (const auto* tokenizer : {r50k.get(), cl100k.get()}) {
    for (int round = 0; round < 50; ++round) {
      std::string text;
      for (int i = 0, n = static_cast<int>(rng() % 300); i < n; ++i) {
        text.push_back(static_cast<char>(rng() % 4 == 0 ? rng() % 256 : ' ' + rng() % 95));
      }
      std::string repaired, decoded;
      data::utf8::repair(text, repaired);
      const auto ids = encode(*tokenizer, text);
      for (uint32_t id : ids) REQUIRE(id < tokenizer->vocab_size());
      tokenizer->decode(ids, decoded);
      CHECK(decoded == repaired);
    }
    std::string text;
    tokenizer->decode(std::vector<uint32_t>{tokenizer->separator()}, text);
    CHECK(text == "<|endoftext|>");
    CHECK_THAT(data_error_of([&] {
                 std::string out;
                 tokenizer->decode(std::vector<uint32_t>{tokenizer->vocab_size()}, out);
               }),
               Catch::Contains("not in the vocabulary"));
  }
  const auto bytes = data::open_tokenizer("bytes");
  CHECK(encode(*bytes, "A\xFF") == std::vector<uint32_t>{65, 255});
  CHECK(bytes->vocab_size() == 256);
}

TEST_CASE("rank files are checked: SHA-256, unknown files, missing files", "[tokenizer]") {
  ScratchDir scratch("tokenizer-files");
  const fs::path installed = data::tokenizer_dir() / "r50k_base.tiktoken";
  REQUIRE(fs::exists(installed));
  // A copy given as a file is known by its hash.
  fs::copy_file(installed, scratch / "copy.tiktoken");
  const auto by_file = data::open_tokenizer((scratch / "copy.tiktoken").string());
  CHECK(by_file->kind() == data::TokenizerKind::r50k_base);
  CHECK(by_file->files_sha256() ==
        "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930");
  // One changed rank: the file is no longer one dseek knows.
  {
    std::fstream file(scratch / "copy.tiktoken", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(5);  // "IQ== 0\n": the rank digit
    file.put('7');
  }
  CHECK_THAT(data_error_of([&] { data::open_tokenizer((scratch / "copy.tiktoken").string()); }),
             Catch::Contains("neither r50k_base's nor cl100k_base's"));
  // The same damage in the tokenizer folder: the expected hash is named.
  fs::create_directories(scratch / "dir");
  fs::copy_file(scratch / "copy.tiktoken", scratch / "dir/r50k_base.tiktoken");
  {
    ScopedEnv env("DSEEK_TOKENIZER_DIR", (scratch / "dir").string());
    const std::string message = data_error_of([&] { data::open_tokenizer("gpt2"); });
    CHECK_THAT(message, Catch::Contains((scratch / "dir/r50k_base.tiktoken").string()));
    CHECK_THAT(message, Catch::Contains(
                            "expected 306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"));
    CHECK_THAT(data_error_of([&] { data::open_tokenizer("cl100k_base"); }),
               Catch::Contains("missing rank file") && Catch::Contains("install-tokenizers.sh"));
  }
  CHECK_THAT(data_error_of([&] { data::open_tokenizer("o200k_base"); }),
             Catch::Contains("unknown tokenizer 'o200k_base'"));
  CHECK_THAT(data_error_of([&] { data::open_tokenizer("sentencepiece"); }),
             Catch::Contains("given by its model file"));
  CHECK_THAT(data_error_of([&] { data::open_tokenizer((scratch / "absent.model").string()); }),
             Catch::Contains("missing SentencePiece model"));
}

TEST_CASE("long pieces merge through a heap into the same ids as tiktoken's loop", "[tokenizer]") {
  for (const char* name : {"r50k_base.tiktoken", "cl100k_base.tiktoken"}) {
    INFO(name);
    std::ifstream in(data::tokenizer_dir() / name, std::ios::binary);
    REQUIRE(in.good());
    const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const data::BpeRanks ranks = data::BpeRanks::parse(contents, name);
    std::mt19937 rng(3);
    for (const std::string alphabet : {"ab", "aeinrst", " ", " \t", "0123456789", "xyz\xC3\xA9"}) {
      for (size_t length : {300u, 1000u, 3000u}) {
        std::string piece;
        while (piece.size() < length) piece.push_back(alphabet[rng() % alphabet.size()]);
        std::vector<uint32_t> loop, heap;
        data::encode_piece(ranks, piece, loop, SIZE_MAX);
        data::encode_piece(ranks, piece, heap, 0);
        INFO("alphabet '" << alphabet << "', " << length << " bytes");
        CHECK(heap == loop);
        std::string back;
        for (uint32_t id : heap) back += ranks.bytes_of(id);
        CHECK(back == piece);
      }
    }
    // A million spaces, one piece: seconds at most (the loop alone would take hours).
    const auto start = std::chrono::steady_clock::now();
    std::vector<uint32_t> ids;
    data::encode_piece(ranks, std::string(1000000, ' '), ids);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(seconds < 5.0);
    CHECK(!ids.empty());
  }
}
