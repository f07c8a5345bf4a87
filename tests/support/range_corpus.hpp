// The corpus of the byte-range tests of `dseek data prepare --nodes N`
// (tests/integration/test_prepare_ranges.cpp, tests/hosts/test_prepare_hosts.cpp): one
// large file of random-word documents, cut into one byte range per node by
// --split-bytes 4000, with exact and near copies of documents of the first range in
// later ranges (so they are caught only if dedup sees every node's documents).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "support/data_test_files.hpp"
#include "support/node_runs.hpp"

namespace dseek::testing::range_corpus {

constexpr int kDocuments = 90;

// 90 documents of 120 random words (~0.7 KB each); document 3's exact copy at the end;
// a near copy of document 40 (one word changed) after document 45, and its exact copy
// before the end.
inline std::vector<std::string> documents() {
  std::vector<std::string> docs;
  for (int d = 0; d < kDocuments; ++d) docs.push_back(random_words("doc", 7000 + d, 120));
  std::string near = docs[40];
  near.replace(near.size() - 5, 5, "zzord");
  docs.insert(docs.begin() + 46, near);
  docs.push_back(near);
  docs.push_back(docs[3]);
  return docs;
}

inline const char* const kSeparator = "\n@@\n";

// The one input file of `docs`, by format: "text" (documents between separators),
// "jsonl", or "gz" (the JSON Lines gzip compressed).
inline void make_input(const std::filesystem::path& dir, const std::string& format,
                       const std::vector<std::string>& docs = documents()) {
  std::string text;
  for (const std::string& doc : docs) {
    text += format == "text" ? doc + kSeparator : "{\"text\": \"" + doc + "\"}\n";
  }
  if (format == "text") write_file(dir / "big.txt", text);
  if (format == "jsonl") write_file(dir / "big.jsonl", text);
  if (format == "gz") write_file(dir / "big.jsonl.gz", gzip(text));
}

inline std::vector<std::string> prepare_args(const std::filesystem::path& in,
                                             const std::filesystem::path& out, int workers,
                                             const std::string& format) {
  std::vector<std::string> args = {
      bin("dseek"), "data", "prepare", "--input", in.string(), "--output", out.string(),
      "--workers", std::to_string(workers), "--piece-bytes", "3000", "--fim-rate", "0.5",
      "--val-fraction", "0.1", "--shard-tokens", "20000", "--no-progress",
      "--split-bytes", "4000"};
  if (format == "text") args.insert(args.end(), {"--text-separator", "\\n@@\\n"});
  return args;
}

}  // namespace dseek::testing::range_corpus
