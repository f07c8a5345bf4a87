// `dseek data tokenize`: encodes the text on stdin with a tokenizer and prints the ids
// separated by spaces (--decode: reads ids, prints the text; --stats: prints only the
// counts and the encoding speed, on stderr, for benchmarks).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "dseek/cmd_data.hpp"
#include "dseek/commands.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/tokenizer.hpp"

namespace dseek::tool {
namespace {

[[noreturn]] int tokenize_usage(const std::string& problem) {
  throw cli::UsageError("tokenize: " + problem);
}

std::string read_stdin() {
  std::string text;
  char buffer[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) text.append(buffer, got);
  return text;
}

int decode(const data::Tokenizer& tokenizer, const std::string& input) {
  std::vector<uint32_t> ids;
  const char* p = input.c_str();
  while (*p != '\0') {
    if (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') {
      ++p;
      continue;
    }
    char* end = nullptr;
    unsigned long long id = std::strtoull(p, &end, 10);
    if (end == p || id > UINT32_MAX || (*end != '\0' && *end != ' ' && *end != '\n' &&
                                        *end != '\t' && *end != '\r')) {
      return tokenize_usage("--decode reads ids separated by white space; '" +
                            std::string(p, std::min<size_t>(20, std::strlen(p))) +
                            "' is not one");
    }
    ids.push_back(static_cast<uint32_t>(id));
    p = end;
  }
  std::string text;
  tokenizer.decode(ids, text);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

int cmd_data_tokenize(const Args& args) {
  std::string name;
  bool to_text = false, stats = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--decode") {
      to_text = true;
    } else if (args[i] == "--stats") {
      stats = true;
    } else if (cli::take_value(args, i, "--tokenizer", name)) {
    } else {
      cli::unknown("option", args[i], {"--tokenizer", "--decode", "--stats", "--help"});
    }
  }
  if (name.empty()) return tokenize_usage("--tokenizer is required");
  if (to_text && stats) return tokenize_usage("--decode and --stats exclude each other");
  {  // a DataError (an unknown tokenizer, a bad rank file) goes to main.cpp: exit 3
    const auto load_start = std::chrono::steady_clock::now();
    auto tokenizer = data::open_tokenizer(name);
    const double load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const std::string input = read_stdin();
    if (to_text) return decode(*tokenizer, input);
    std::vector<uint32_t> ids;
    const auto start = std::chrono::steady_clock::now();
    tokenizer->encode(input, ids);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (stats) {
      std::fprintf(stderr,
                   "tokenizer %s: %zu bytes -> %zu tokens in %.4f s (%.0f tokens/s, %.2f MB/s; "
                   "loading took %.3f s)\n",
                   tokenizer->name(), input.size(), ids.size(), seconds,
                   seconds > 0 ? ids.size() / seconds : 0.0,
                   seconds > 0 ? input.size() / seconds / 1e6 : 0.0, load_seconds);
      return 0;
    }
    std::string line;
    line.reserve(ids.size() * 6);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line.push_back(' ');
      line += std::to_string(ids[i]);
    }
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stdout);
    return 0;
  }
}

}  // namespace dseek::tool
