// `dseek report` on a real run: a 2-node `dseek launch` job with evaluations,
// checkpoints and a crashed actor; the terminal summary; the HTML page checked in
// Debian's headless Chromium (tests/report/check_report_in_chromium.py: no console error,
// a screenshot, the plotted series equal events.jsonl); every node's trace and `dseek
// trace merge`; and bad input: no run directory,
// a corrupt events line (file:line named, the previous report kept).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("dseek report: a launched job's page in headless Chromium equals its events",
          "[report][launch]") {
  ScratchDir run("report-launch");
  const auto job = tiny_launch(run.path(), 2, 30,
                               {"--set", "train.eval_every=10", "--set", "checkpoint.every_steps=10",
                                "--set", "metrics.baseline_tokens_per_s=1000"}) +
                   faults(R"({kind = "crash_actor", actor = "metrics_exporter", step = 15, node = 1})");
  const auto launched = run_process(job, 300s, launch_env());
  INFO(launched.output);
  REQUIRE(launched.exit_code == 0);

  const auto html = run.path() / "report.html";
  const auto report = run_process({bin("dseek"), "report", run.path().string(), "--output",
                                   html.string()}, 60s);
  INFO(report.output);
  REQUIRE(report.exit_code == 0);
  CHECK_THAT(report.output, Contains("2 node(s), 30 steps"));
  CHECK_THAT(report.output, Contains("compute utilization (MFU, median)"));
  CHECK_THAT(report.output, Contains("node 1: 30 steps"));
  CHECK_THAT(report.output, Contains("report: " + html.string()));
  const std::string page = slurp(html);
  // Self-contained: nothing to fetch.
  CHECK(page.find("src=") == std::string::npos);
  CHECK(page.find("href=") == std::string::npos);
  CHECK(page.find("http") == std::string::npos);
  CHECK_THAT(page, Contains("data-event=\"fault_injected\""));
  CHECK_THAT(page, Contains("data-event=\"checkpoint_committed\""));

  const auto artifacts = binary_dir() / "test-artifacts";
  std::filesystem::create_directories(artifacts);
  const auto screenshot = artifacts / "report-screenshot.png";
  std::filesystem::remove(screenshot);
  const auto browser = run_process({"/usr/bin/python3",
                                    (source_dir() / "tests/report/check_report_in_chromium.py").string(),
                                    html.string(), run.path().string(), screenshot.string()},
                                   180s);
  INFO(browser.output);
  CHECK(browser.exit_code == 0);
  CHECK_THAT(browser.output, Contains("screenshot: " + screenshot.string()));
  CHECK(std::filesystem::file_size(screenshot) > 10000);

  // Every node's trace, and the two on one timeline.
  for (int node = 0; node < 2; ++node)
    CHECK_THAT(slurp(run / ("node-" + std::to_string(node)) / "trace.json"),
               Contains("\"name\": \"compute 30\""));
  const auto merged = run_process({bin("dseek"), "trace", "merge", run.path().string()}, 60s);
  INFO(merged.output);
  CHECK(merged.exit_code == 0);
  CHECK_THAT(merged.output, Contains("merged 2 node traces"));
  const std::string timeline = slurp(run / "trace-merged.json");
  CHECK_THAT(timeline, Contains("\"name\": \"node 0\""));
  CHECK_THAT(timeline, Contains("\"name\": \"node 1\""));
  CHECK_THAT(timeline, Contains("\"name\": \"checkpoint write 10\""));

  // A corrupt line in the middle of a node's events: named, and the report stays.
  const std::string before = slurp(html);
  {
    std::ofstream log(run.path() / "node-1" / "events.jsonl", std::ios::app);
    log << "{not an event\n{\"ts\":1,\"event\":\"x\"}\n";
  }
  const auto corrupt = run_process({bin("dseek"), "report", run.path().string(), "--output",
                                    html.string()}, 60s);
  CHECK(corrupt.exit_code != 0);
  CHECK_THAT(corrupt.output, Contains((run.path() / "node-1" / "events.jsonl").string() + ":"));
  CHECK_THAT(corrupt.output, Contains("not an event"));
  CHECK(slurp(html) == before);

  const auto missing = run_process({bin("dseek"), "report", (run.path() / "absent").string()}, 30s);
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.output, Contains("absent: no such run directory"));
}
