// Unit tests of the pure parts of `dseek data prepare`'s stages: the decode stage's
// UTF-8 repair and NFC, the quality filters (each reason), MinHash and its LSH band
// choice, the dedup index (exact, near, rollback), fill-in-the-middle (PSM and SPM,
// deterministic, at its rate) and the document reader's pieces.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/data/dedup_index.hpp"
#include "runtime/data/fim.hpp"
#include "runtime/data/minhash.hpp"
#include "runtime/data/piece_stages.hpp"
#include "runtime/data/quality_filter.hpp"
#include "runtime/data/text_decode.hpp"
#include "runtime/data/tokenizer.hpp"
#include "support/data_test_files.hpp"
#include "support/test_paths.hpp"

namespace data = dseek::data;
using data::DropReason;

namespace {

// A text of `words` distinct words from a seed (w<seed>_<i>).
std::string words_text(int seed, int words, int from = 0) {
  std::string text;
  for (int i = from; i < from + words; ++i) {
    text += 'w';  // (not "w" + ...: GCC 12 warns falsely of -Wrestrict there)
    text += std::to_string(seed);
    text += 'x';
    text += std::to_string(i);
    text += ' ';
  }
  return text;
}

data::PieceDocument document_of(const std::string& text, const data::MinHasher& hasher) {
  data::PieceDocument d;
  d.text = text;
  data::Piece piece;
  piece.documents.push_back(d);
  data::CleanSettings settings;
  settings.max_repeated_lines = settings.max_symbol_ratio = settings.max_digit_ratio = 1.0;
  data::clean_piece(piece, settings, hasher);
  return piece.documents[0];
}

}  // namespace

TEST_CASE("decode repairs invalid UTF-8, counts it, and composes to NFC", "[data][clean]") {
  std::string out;
  CHECK(data::decode_text("plain ascii", true, true, out) == 0);
  CHECK(out == "plain ascii");
  CHECK(data::decode_text("a\xff" "b\xc3", true, true, out) == 2);
  CHECK(out == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  CHECK(data::decode_text("a\xff" "b\xc3", false, true, out) == 0);  // --keep-bytes
  CHECK(out == "a\xff" "b\xc3");
  // e + combining acute (U+0065 U+0301) is U+00E9 in NFC; left alone without it.
  CHECK(data::decode_text("caf\x65\xcc\x81", true, true, out) == 0);
  CHECK(out == "caf\xc3\xa9");
  CHECK(data::decode_text("caf\x65\xcc\x81", true, false, out) == 0);
  CHECK(out == "caf\x65\xcc\x81");
}

TEST_CASE("each quality filter drops by its own reason", "[data][clean]") {
  data::CleanSettings s;
  s.min_chars = 10;
  s.max_chars = 200;
  const std::string prose = "A normal sentence of prose, with words and a few digits 42.\n";
  CHECK(data::quality_verdict(prose, s) == DropReason::kept);
  CHECK(data::quality_verdict("", s) == DropReason::empty);
  CHECK(data::quality_verdict("tiny", s) == DropReason::too_short);
  CHECK(data::quality_verdict(std::string(201, 'a'), s) == DropReason::too_long);
  CHECK(data::quality_verdict("#$%&*!@#$%^&*()_+{}|:<>?~#$%&*!@#$%^&*() ok", s) ==
        DropReason::symbol_ratio);
  CHECK(data::quality_verdict("1234567890 1234567890 1234567890 12345 abc", s) ==
        DropReason::digit_ratio);
  s.max_chars = 0;
  std::string repeated;
  for (int i = 0; i < 10; ++i) repeated += "the same line again\n";
  CHECK(data::quality_verdict(repeated, s) == DropReason::repeated_lines);
  // Short lines ("}") repeat in any code: not counted.
  std::string code;
  for (int i = 0; i < 10; ++i) code += "int f" + std::to_string(i) + "(int x) {\n  return x;\n}\n";
  CHECK(data::quality_verdict(code, s) == DropReason::kept);
  // Ratios judge no text shorter than ratio_min_chars non-space characters.
  CHECK(data::quality_verdict("#$%&*!", s) == DropReason::too_short);
  s.min_chars = 0;
  CHECK(data::quality_verdict("#$%&*!", s) == DropReason::kept);
  // 1 turns a ratio off.
  s.max_symbol_ratio = 1.0;
  CHECK(data::quality_verdict("#$%&*!@#$%^&*()_+{}|:<>?~#$%&*!@#$%^&*() ok", s) == DropReason::kept);
}

TEST_CASE("MinHash estimates Jaccard similarity and LSH bands fit the threshold", "[data][clean]") {
  const data::MinHasher hasher(256, 1);
  // Shingles of one word: 100 words sharing 80 of them: Jaccard 80 / 120.
  const auto a = hasher.signature(words_text(1, 100));
  const auto b = hasher.signature(words_text(1, 80) + words_text(2, 20));
  CHECK(data::estimated_jaccard(a, a) == 1.0);
  CHECK(data::estimated_jaccard(a, b) == Approx(80.0 / 120.0).margin(0.1));
  CHECK(data::estimated_jaccard(a, hasher.signature(words_text(3, 100))) < 0.1);
  CHECK(hasher.signature(" ,;. ").empty());
  // Case and punctuation do not make a text different.
  CHECK(hasher.signature("Hello, World") == hasher.signature("hello world"));

  for (double threshold : {0.5, 0.8, 0.95}) {
    const data::LshBands bands = data::choose_lsh_bands(128, threshold);
    INFO(threshold << ": " << bands.bands << " x " << bands.rows);
    CHECK(bands.bands * bands.rows <= 128);
    // The S curve's midpoint (1/b)^(1/r) lies near the threshold.
    const double midpoint = std::pow(1.0 / bands.bands, 1.0 / bands.rows);
    CHECK(midpoint == Approx(threshold).margin(0.12));
  }
}

TEST_CASE("the dedup index drops exact and near duplicates, keeps the first, rolls back",
          "[data][clean]") {
  data::CleanSettings settings;
  settings.near_threshold = 0.8;
  const data::MinHasher hasher(settings.minhash_permutations, settings.shingle_words);
  data::DedupIndex index(settings);
  const std::string base = words_text(7, 300);
  const auto original = document_of(base, hasher);
  CHECK(index.check_and_insert(original) == DropReason::kept);
  CHECK(index.check_and_insert(original) == DropReason::exact_duplicate);
  // One word in 300 changed: a near duplicate (5-word shingles: ~98% alike).
  std::string edited = base;
  edited.replace(edited.find("w7x150"), 6, "CHANGED");
  CHECK(index.check_and_insert(document_of(edited, hasher)) == DropReason::near_duplicate);
  // Half the words different: kept.
  const auto half = document_of(words_text(7, 150) + words_text(8, 150), hasher);
  const auto mark = index.mark();
  CHECK(index.check_and_insert(half) == DropReason::kept);
  CHECK(index.check_and_insert(half) == DropReason::exact_duplicate);
  index.rollback(mark);
  CHECK(index.check_and_insert(half) == DropReason::kept);  // forgotten, so new again

  settings.near_dedup = false;
  data::DedupIndex exact_only(settings);
  CHECK(exact_only.check_and_insert(original) == DropReason::kept);
  CHECK(exact_only.check_and_insert(document_of(edited, hasher)) == DropReason::kept);
}

TEST_CASE("fill-in-the-middle rearranges a share of the documents, PSM and SPM",
          "[data][augment]") {
  const data::FimTokens sentinels{1000, 1001, 1002};
  data::FimSettings settings;
  settings.rate = 0.5;
  settings.spm_rate = 0.5;
  settings.seed = 3;
  std::vector<uint32_t> tokens(50);
  for (uint32_t i = 0; i < tokens.size(); ++i) tokens[i] = i;
  int chosen = 0, psm = 0, spm = 0;
  for (uint64_t key = 0; key < 400; ++key) {
    std::vector<uint32_t> t = tokens;
    const bool fim = data::apply_fim(t, key * 7919, settings, sentinels);
    std::vector<uint32_t> again = tokens;
    REQUIRE(data::apply_fim(again, key * 7919, settings, sentinels) == fim);  // deterministic
    REQUIRE(again == t);
    if (!fim) {
      CHECK(t == tokens);
      continue;
    }
    ++chosen;
    REQUIRE(t.size() == tokens.size() + 3);
    CHECK(t[0] == sentinels.prefix);
    const auto suf = std::find(t.begin(), t.end(), sentinels.suffix);
    const auto mid = std::find(t.begin(), t.end(), sentinels.middle);
    REQUIRE(suf < mid);
    std::vector<uint32_t> prefix(t.begin() + 1, suf), suffix(suf + 1, mid), middle(mid + 1, t.end());
    std::vector<uint32_t> whole;
    if (suf == t.begin() + 1) {  // SPM: <PRE><SUF> suffix <MID> prefix+middle
      ++spm;
      whole = middle;
      whole.insert(whole.end(), suffix.begin(), suffix.end());
    } else {  // PSM: <PRE> prefix <SUF> suffix <MID> middle
      ++psm;
      whole = prefix;
      whole.insert(whole.end(), middle.begin(), middle.end());
      whole.insert(whole.end(), suffix.begin(), suffix.end());
    }
    CHECK(whole == tokens);  // the same tokens, cut and moved
  }
  CHECK(chosen > 140);
  CHECK(chosen < 260);
  CHECK(psm > 30);
  CHECK(spm > 30);
  settings.rate = 0;
  std::vector<uint32_t> t = tokens;
  CHECK_FALSE(data::apply_fim(t, 1, settings, sentinels));
}

TEST_CASE("FIM sentinels: cl100k_base's own, three ids past the vocabulary otherwise",
          "[data][augment]") {
  const auto bytes = data::open_tokenizer("bytes");
  const data::FimTokens b = data::fim_tokens_for(*bytes);
  CHECK(b.prefix == 256);
  CHECK(b.suffix == 258);
  data::FimSettings settings;
  CHECK(data::dataset_vocab(*bytes, settings) == 256);
  settings.rate = 0.1;
  CHECK(data::dataset_vocab(*bytes, settings) == 259);
}

TEST_CASE("a file is read in pieces of at most piece_bytes, the same every time",
          "[data][clean]") {
  dseek::testing::ScratchDir scratch("data-pieces");
  std::string lines;
  for (int i = 0; i < 100; ++i) lines += "{\"text\": \"document number " + std::to_string(i) + "\"}\n";
  lines += "not json\n";
  dseek::testing::write_file(scratch / "a.jsonl", lines);
  const data::SourceFile file{"a.jsonl", scratch / "a.jsonl", std::nullopt};
  const data::InputOptions input;
  data::FileDecoder decoder(file, 4, input, true, true, 100);
  std::vector<uint64_t> lines_seen;
  uint32_t pieces = 0, malformed = 0;
  while (!decoder.done()) {
    data::Piece piece = decoder.next();
    CHECK(piece.file == 4);
    CHECK(piece.number == pieces++);
    uint64_t bytes = 0;
    for (const auto& d : piece.documents) {
      bytes += d.text_bytes;
      lines_seen.push_back(d.line);
    }
    if (!piece.last) CHECK(bytes >= 100);
    CHECK(bytes < 100 + 20);
    malformed += static_cast<uint32_t>(piece.counts.malformed_lines);
    if (piece.last) CHECK(piece.outcome == data::FileOutcome::taken);
  }
  CHECK(pieces > 10);
  CHECK(malformed == 1);
  REQUIRE(lines_seen.size() == 100);
  for (uint64_t i = 0; i < 100; ++i) CHECK(lines_seen[i] == i + 1);
}
