// `dseek bench allreduce` end to end: it starts its ranks, prints one JSON line per size
// with the bandwidth fields, and fails cleanly (no hang) on bad usage.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace {

using dseek::testing::run_process;

std::string dseek_bin() { return (dseek::testing::binary_dir() / "bin" / "dseek").string(); }

int count_lines_with(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) ++n;
  return n;
}

}  // namespace

TEST_CASE("dseek bench allreduce prints one JSON line per size", "[comm][bench]") {
  for (int ranks : {2, 3}) {
    const auto r = run_process({dseek_bin(), "bench", "allreduce", "--ranks", std::to_string(ranks), "--bytes", "4K,65537",
                                "--iters", "3", "--warmup", "1", "--timeout", "60"},
                               std::chrono::seconds(90));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(count_lines_with(r.output, "{\"bench\":\"allreduce\",\"impl\":\"dseek\",\"ranks\":" + std::to_string(ranks)) == 2);
    CHECK(count_lines_with(r.output, "\"bytes\":4096,") == 1);
    CHECK(count_lines_with(r.output, "\"bytes\":65536,") == 1);  // whole fp32 elements
    CHECK(count_lines_with(r.output, "\"busbw_gbps\":") == 2);
  }
}

TEST_CASE("dseek bench allreduce --memcpy-bytes measures the copy ceiling", "[comm][bench]") {
  const auto r = run_process({dseek_bin(), "bench", "allreduce", "--memcpy-bytes", "1M", "--iters", "3"}, std::chrono::seconds(30));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(count_lines_with(r.output, "{\"bench\":\"memcpy\",\"bytes\":1048576,") == 1);
}

TEST_CASE("dseek bench allreduce rejects bad usage", "[comm][bench]") {
  for (const auto& args : {std::vector<std::string>{"--ranks", "0", "--bytes", "4K"},
                           std::vector<std::string>{"--ranks", "2"},
                           std::vector<std::string>{"--ranks", "2", "--bytes", "4K", "--dtype", "f64"},
                           std::vector<std::string>{"--ranks", "2", "--bytes", "4X"},
                           std::vector<std::string>{"--bogus", "1"}}) {
    std::vector<std::string> argv{dseek_bin(), "bench", "allreduce"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_process(argv, std::chrono::seconds(30));
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK_FALSE(r.timed_out);
  }
}
