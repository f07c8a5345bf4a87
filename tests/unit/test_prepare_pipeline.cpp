// Tests of `dseek data prepare`'s pipeline of actors (actors/data/): a generated corpus
// with duplicates, near duplicates, junk and broken files gives the counts by reason
// and exactly the kept documents in order; the output is the same bytes for 1, 2 and 3
// workers; a crashed actor of any stage is restarted and the output does not change
// (nothing lost, nothing twice); with a deliberately slow writer, the pieces in flight
// stay within the window (memory does not grow with the corpus); FIM end to end.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "actors/data/prepare_pipeline.hpp"
#include "runtime/data/dataset_index.hpp"
#include "runtime/data/token_dataset.hpp"
#include "support/data_test_files.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;
namespace data = dseek::data;
using data::DropReason;
using dseek::testing::ScratchDir;
using dseek::testing::write_file;
using dseek::testing::gzip;

namespace {


// prefix + n + suffix (appended: GCC 12 warns falsely of -Wrestrict on "f" + ...).
std::string numbered(const char* prefix, int n, const char* suffix = "") {
  std::string name = prefix;
  name += std::to_string(n);
  name += suffix;
  return name;
}

// A document of prose-like words, distinct for each seed.
std::string prose(int seed, int words = 250) {
  static const char* vocabulary[] = {"river", "stone", "light", "green", "after", "under",
                                     "quiet", "table", "north", "paper", "metal", "cloud"};
  std::string text = numbered("Document ", seed, ":");
  uint64_t state = static_cast<uint64_t>(seed) * 2654435761u + 1;
  for (int i = 0; i < words; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    text += " ";
    text += vocabulary[(state >> 33) % 12];
    text += std::to_string((state >> 40) % 97);
  }
  return text + ".\n";
}

std::string json_line(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    if (c == '\n') escaped += "\\n";
    else if (c == '"') escaped += "\\\"";
    else escaped += c;
  }
  return std::string("{\"text\": \"").append(escaped).append("\"}\n");
}

struct Corpus {
  std::vector<std::string> kept;  // the texts that must come out, in order
  std::map<DropReason, uint64_t> dropped;
};

// Files in path order: a.txt .. (texts), b.jsonl (lines), c.jsonl.gz (damaged),
// d-*.txt (junk), e.jsonl (duplicates of earlier documents), f.bin (binary).
Corpus make_corpus(const fs::path& root, int documents = 40) {
  Corpus corpus;
  for (int i = 0; i < documents / 2; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "a%03d.txt", i);
    write_file(root / name, prose(i));
    corpus.kept.push_back(prose(i));
  }
  std::string lines;
  for (int i = documents / 2; i < documents; ++i) {
    lines += json_line(prose(i));
    corpus.kept.push_back(prose(i));
  }
  lines += "{\"text\": broken\n{\"other\": \"no text field\"}\n";
  // Invalid UTF-8 is repaired (one U+FFFD), a decomposed accent composed (NFC).
  lines += "{\"text\": \"caf\\u0065\\u0301 and more words to make it long enough\"}\n";
  corpus.kept.push_back("caf\xc3\xa9 and more words to make it long enough");
  write_file(root / "b.jsonl", lines);
  write_file(root / "b2.txt", "bad byte \xff here, among enough ordinary words\n");
  corpus.kept.push_back("bad byte \xEF\xBF\xBD here, among enough ordinary words\n");
  // Truncated gzip: the whole file is dropped, its documents with it.
  const std::string gz = gzip(json_line(prose(900)) + json_line(prose(901)));
  write_file(root / "c.jsonl.gz", gz.substr(0, gz.size() - 12));
  write_file(root / "d-symbols.txt", "#$%&*!@#$%^&*()_+{}|:<>?~#$%&*!@#$%^&*()_+{}|:<>?~ x\n");
  write_file(root / "d-digits.txt", "0123456789 0123456789 0123456789 0123456789 1234 ab\n");
  std::string repeated;
  for (int i = 0; i < 12; ++i) repeated += "this line says the same thing\n";
  write_file(root / "d-repeated.txt", repeated);
  write_file(root / "d-empty-field.jsonl", "{\"text\": \"\"}\n");
  corpus.dropped[DropReason::symbol_ratio] = 1;
  corpus.dropped[DropReason::digit_ratio] = 1;
  corpus.dropped[DropReason::repeated_lines] = 1;
  corpus.dropped[DropReason::empty] = 1;
  // Exact copies and near copies (one word changed) of earlier documents.
  std::string copies;
  for (int i = 0; i < 5; ++i) copies += json_line(prose(i * 3));
  for (int i = 0; i < 5; ++i) {
    std::string near = prose(i * 3 + 1);
    near.replace(near.find(' ', 20) + 1, 5, "ZZZZZ");
    copies += json_line(near);
  }
  write_file(root / "e.jsonl", copies);
  corpus.dropped[DropReason::exact_duplicate] = 5;
  corpus.dropped[DropReason::near_duplicate] = 5;
  write_file(root / "f.bin", std::string("\x7f" "ELF\0\x01", 6));
  return corpus;
}

struct Run {
  data::PrepareSummary summary;
  std::string log;
};

Run prepare(const fs::path& input, const fs::path& output,
            const std::function<void(data::PrepareOptions&)>& adjust = {}) {
  data::PrepareOptions options;
  options.input = input;
  options.output = output;
  options.val_fraction = 0;
  options.piece_bytes = 256;  // many pieces from a small corpus
  options.progress = false;
  if (adjust) adjust(options);
  std::ostringstream log;
  Run run{dseek::actors::prepare_dataset(options, log), ""};
  run.log = log.str();
  return run;
}

// The data set's files (report.json apart: it holds timings), by name.
std::map<std::string, std::string> output_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename();
    if (name == "report.json") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    files[name] = text.str();
  }
  return files;
}

std::vector<std::string> train_documents(const fs::path& dir) {
  data::TokenDataset train = data::TokenDataset::open(dir, data::Split::train);
  std::vector<int32_t> tokens(train.num_tokens());
  train.read(0, tokens.size(), tokens.data());
  std::vector<std::string> documents(1);
  for (int32_t t : tokens) {
    if (t == 0) documents.emplace_back();
    else documents.back().push_back(static_cast<char>(t));
  }
  return documents;
}

}  // namespace

TEST_CASE("the pipeline keeps the good documents in order and counts every drop by reason",
          "[data][pipeline]") {
  ScratchDir scratch("prepare-corpus");
  const Corpus corpus = make_corpus(scratch / "in");
  const Run run = prepare(scratch / "in", scratch / "out", [](data::PrepareOptions& o) {
    o.workers = 2;
  });
  INFO(run.log);
  const data::PrepareSummary& s = run.summary;
  CHECK(train_documents(scratch / "out") == corpus.kept);
  CHECK(s.documents == corpus.kept.size());
  CHECK(s.dropped[0] == corpus.kept.size());
  for (size_t r = 1; r < data::kDropReasons; ++r) {
    const auto reason = static_cast<DropReason>(r);
    INFO(data::drop_reason_name(reason));
    const uint64_t expected = corpus.dropped.count(reason) ? corpus.dropped.at(reason) : 0;
    CHECK(s.dropped[r] == expected);
  }
  uint64_t dropped = 0;
  for (auto count : s.dropped) dropped += count;
  CHECK(s.documents_in == dropped);
  CHECK(s.damaged_files == 1);
  CHECK(s.binary_files == 1);
  CHECK(s.malformed_lines == 1);
  CHECK(s.missing_field_lines == 1);
  CHECK(s.replaced_sequences == 1);
  CHECK(s.pieces > 20);
  CHECK(s.restarts == 0);
  CHECK_THAT(run.log, Catch::Contains("b.jsonl:") && Catch::Contains("c.jsonl.gz") &&
                          Catch::Contains("dropped exact_duplicate"));
  // The report in the output folder.
  std::ifstream report(scratch / "out" / "report.json");
  std::string json((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
  CHECK_THAT(json, Catch::Contains("\"near_duplicate\":5") &&
                       Catch::Contains(std::string("\"documents_in\":").append(std::to_string(s.documents_in))));
}

TEST_CASE("the pipeline writes the same bytes for 1, 2 and 3 workers", "[data][pipeline]") {
  ScratchDir scratch("prepare-workers");
  make_corpus(scratch / "in", 80);
  auto settings = [](uint32_t workers) {
    return [workers](data::PrepareOptions& o) {
      o.workers = workers;
      o.val_fraction = 0.2;
      o.shard_tokens = 1000;
      o.fim.rate = 0.5;
    };
  };
  prepare(scratch / "in", scratch / "w1", settings(1));
  const auto expected = output_files(scratch / "w1");
  CHECK(expected.size() > 4);  // shards and the index
  for (uint32_t workers : {2u, 3u}) {
    INFO(workers << " workers");
    const std::string out = numbered("w", static_cast<int>(workers));
    const Run run = prepare(scratch / "in", scratch / out, settings(workers));
    CHECK(run.summary.workers == workers);
    CHECK(output_files(scratch / out) == expected);
  }
}

TEST_CASE("a crashed stage actor is restarted and its piece redone: the same output",
          "[data][pipeline][faults]") {
  ScratchDir scratch("prepare-crash");
  make_corpus(scratch / "in");
  auto base = [](data::PrepareOptions& o) {
    o.workers = 2;
    o.val_fraction = 0.1;
    o.fim.rate = 0.3;  // so that the augment stage runs
  };
  prepare(scratch / "in", scratch / "clean-run", base);
  const auto expected = output_files(scratch / "clean-run");
  for (size_t s = 0; s < data::kPrepareStages; ++s) {
    const auto stage = static_cast<data::PrepareStage>(s);
    const std::string name = data::prepare_stage_name(stage);
    INFO("crash in " << name);
    const std::string out = std::string("crash-").append(name);
    const Run run = prepare(scratch / "in", scratch / out, [&](data::PrepareOptions& o) {
      base(o);
      o.faults.crash_stage = stage;
      o.faults.crash_at = 5;
    });
    CHECK(run.summary.restarts == 1);
    CHECK_THAT(run.log, Catch::Contains(std::string("injected fault: crash_actor data prepare ").append(name)));
    CHECK(output_files(scratch / out) == expected);
  }
}

TEST_CASE("a slow writer holds the readers back: pieces in flight stay within the window",
          "[data][pipeline][backpressure]") {
  ScratchDir scratch("prepare-slow-writer");
  for (int i = 0; i < 150; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "doc%03d.txt", i);
    write_file(scratch / "in" / name, prose(i, 40));
  }
  const Run run = prepare(scratch / "in", scratch / "out", [](data::PrepareOptions& o) {
    o.workers = 2;
    o.window = 6;
    o.piece_bytes = 128;
    o.faults.writer_delay_ms = 5;
  });
  const data::PrepareSummary& s = run.summary;
  INFO("peak " << s.peak_pieces << " pieces, " << s.peak_bytes << " bytes; largest piece "
               << s.largest_piece_bytes << "; read " << s.read_bytes);
  CHECK(s.pieces == 150);
  CHECK(s.documents == 150);
  CHECK(s.peak_pieces <= 6);  // the bound: window pieces ...
  CHECK(s.peak_pieces == 6);  // ... reached, since the writer is the slow stage
  CHECK(s.peak_bytes <= 6 * s.largest_piece_bytes);  // ... of at most the largest piece
  CHECK(s.peak_bytes * 10 < s.read_bytes * 4);  // far from the corpus (tokens: 4 bytes each)
  // The stage queues: the pieces pile up before the slow writer, at most the window (all
  // of it when the writer, between two pieces, has returned one's credit and not yet
  // taken the next: seen on a loaded machine); nothing waits for decode (it reads only
  // with a free credit), and no queue is longer than the window.
  const auto waiting = [&s](data::PrepareStage stage) {
    return s.stage_peak_waiting[static_cast<size_t>(stage)];
  };
  INFO("peak waiting: clean " << waiting(data::PrepareStage::clean) << ", dedup "
                              << waiting(data::PrepareStage::dedup) << ", tokenize "
                              << waiting(data::PrepareStage::tokenize) << ", write "
                              << waiting(data::PrepareStage::write));
  CHECK(waiting(data::PrepareStage::write) >= 3);
  CHECK(waiting(data::PrepareStage::write) <= 6);
  CHECK(waiting(data::PrepareStage::decode) == 0);
  for (size_t stage = 0; stage < data::kPrepareStages; ++stage) CHECK(s.stage_peak_waiting[stage] <= 6);
  CHECK_THAT(run.log, Catch::Contains("at most " +
                                      std::to_string(waiting(data::PrepareStage::write)) +
                                      " pieces waiting"));
}

TEST_CASE("FIM writes sentinels past the byte vocabulary and the index records it",
          "[data][pipeline][augment]") {
  ScratchDir scratch("prepare-fim");
  for (int i = 0; i < 30; ++i) write_file(scratch / "in" / numbered("f", i, ".txt"), prose(i));
  const Run run = prepare(scratch / "in", scratch / "out", [](data::PrepareOptions& o) {
    o.fim.rate = 0.5;
  });
  CHECK(run.summary.fim_documents > 5);
  CHECK(run.summary.fim_documents < 25);
  CHECK(data::read_dataset_index(scratch / "out").vocab_size == 259);
  data::TokenDataset train = data::TokenDataset::open(scratch / "out", data::Split::train);
  std::vector<int32_t> tokens(train.num_tokens());
  train.read(0, tokens.size(), tokens.data());
  CHECK(std::count(tokens.begin(), tokens.end(), 256) == static_cast<long>(run.summary.fim_documents));
  CHECK(std::count(tokens.begin(), tokens.end(), 258) == static_cast<long>(run.summary.fim_documents));
}

TEST_CASE("the cache: a rerun takes every file from it, a changed file misses from there on",
          "[data][pipeline][cache]") {
  ScratchDir scratch("prepare-cache");
  make_corpus(scratch / "in");
  const fs::path cache = scratch / "cache";
  auto cached = [&](data::PrepareOptions& o) {
    o.workers = 2;
    o.val_fraction = 0.1;
    o.fim.rate = 0.3;
    o.cache_dir = cache;
  };
  const Run first = prepare(scratch / "in", scratch / "first", cached);
  CHECK(first.summary.cached_files == 0);
  const auto expected = output_files(scratch / "first");
  const Run again = prepare(scratch / "in", scratch / "again", cached);
  const uint64_t files = 29;  // make_corpus's
  CHECK(again.summary.cached_files == files);
  CHECK(again.summary.stage_documents[static_cast<size_t>(data::PrepareStage::tokenize)] == 0);
  CHECK(output_files(scratch / "again") == expected);
  CHECK(again.summary.dropped == first.summary.dropped);

  // b2.txt is the 22nd file: the 21 before it still come from the cache.
  write_file(scratch / "in" / "b2.txt", "another text, among enough ordinary words, in b2\n");
  const Run changed = prepare(scratch / "in", scratch / "changed", cached);
  CHECK(changed.summary.cached_files == 21);
  prepare(scratch / "in", scratch / "uncached", [](data::PrepareOptions& o) {
    o.val_fraction = 0.1;
    o.fim.rate = 0.3;
  });
  CHECK(output_files(scratch / "changed") == output_files(scratch / "uncached"));

  // A writer that crashed leaves no half entry: the next run is whole again.
  const Run crashed = prepare(scratch / "in", scratch / "crashed", [&](data::PrepareOptions& o) {
    cached(o);
    o.cache_dir = scratch / "cache2";
    o.faults.crash_stage = data::PrepareStage::write;
    o.faults.crash_at = 10;
  });
  CHECK(crashed.summary.restarts == 1);
  const Run after = prepare(scratch / "in", scratch / "after", [&](data::PrepareOptions& o) {
    cached(o);
    o.cache_dir = scratch / "cache2";
  });
  CHECK(after.summary.cached_files >= files - 1);
  CHECK(output_files(scratch / "after") == output_files(scratch / "uncached"));
}
