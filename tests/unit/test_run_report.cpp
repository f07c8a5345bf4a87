// `dseek report`'s reading and rendering without a run (runtime/metrics/run_record.hpp,
// html_report.hpp): events written by EventLog come back with their exact numbers, in
// the page's data attributes too; a last line cut short by a killed node is skipped, a
// corrupt line elsewhere names file:line; the five measures are medians (memory: the
// largest); text from the events is escaped.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/html_report.hpp"
#include "runtime/metrics/run_record.hpp"
#include "support/test_paths.hpp"

using namespace dseek;
using Catch::Matchers::Contains;

namespace {

void write_steps(const std::filesystem::path& run, int64_t node, const std::vector<double>& mfu) {
  metrics::EventLog log(run, node);
  log.emit("measures", util::JsonLine().add("peak_source", "configured")
                           .add("config", "[model]\ndim = 64 # <b>&\n"));
  for (size_t i = 0; i < mfu.size(); ++i)
    log.emit("step", util::JsonLine().add("step", static_cast<int64_t>(i + 1))
                         .add("loss", 0.1 + 0.2 * static_cast<double>(i)).add("mfu", mfu[i])
                         .add("comm_share", 0.125).add("memory_fraction", 0.25 * double(node + 1))
                         .add("step_ms", 10.0).add("compute_ms", 8.0).add("comm_ms", 1.0)
                         .add("data_wait_ms", 0.5).add("tokens_per_s_per_node", 100.0));
  log.emit("eval", util::JsonLine().add("step", static_cast<int64_t>(mfu.size())).add("val_loss", 2.5));
  log.emit("node_lost", util::JsonLine().add("lost_node", 1).add("reason", "down"));
  log.emit("train_done", util::JsonLine().add("step", static_cast<int64_t>(mfu.size())));
}

}  // namespace

TEST_CASE("run report: events read back exactly, measures, escaping", "[metrics][report]") {
  testing::ScratchDir dir("run-report");
  write_steps(dir.path(), 0, {0.5, 0.1, 0.3});
  write_steps(dir.path(), 1, {0.2, 0.4, 0.6});
  const auto run = metrics::read_run(dir.path());
  REQUIRE(run.nodes.size() == 2);
  REQUIRE(run.nodes[0].steps.size() == 3);
  // The numbers as events.jsonl has them (JsonLine writes 16 digits: 0.1 + 0.2 is "0.3").
  CHECK(run.nodes[0].steps[1].get("loss") == std::strtod("0.3000000000000000", nullptr));
  CHECK(run.nodes[1].evals == std::vector<std::pair<double, double>>{{3, 2.5}});
  REQUIRE(run.nodes[0].timeline.size() == 2);
  CHECK(run.nodes[0].timeline[0].event == "node_lost");
  CHECK(run.nodes[0].timeline[0].detail == "lost_node=1 reason=down");

  const auto m = metrics::run_measures(run);
  CHECK(m.mfu == Approx(0.35));  // median of 0.1 0.2 0.3 0.4 0.5 0.6
  CHECK(m.memory_fraction == 0.5);
  CHECK(m.comm_share == 0.125);
  CHECK(m.steps == 3);

  const std::string html = metrics::render_html_report(run);
  CHECK_THAT(html, Contains("data-field=\"loss\" data-label=\"loss node 0\" data-x=\"1 2 3\" "
                            "data-y=\"0.10000000000000001 0.29999999999999999 0.5\""));
  CHECK_THAT(html, Contains("data-measure=\"mfu\" data-value=\"0.34999999999999998\""));
  CHECK_THAT(html, Contains("dim = 64 # &lt;b&gt;&amp;"));
  CHECK(html.find("<b>&") == std::string::npos);
  CHECK_THAT(html, Contains("data-event=\"node_lost\""));
  const std::string text = metrics::render_text_summary(run);
  CHECK_THAT(text, Contains("compute utilization (MFU, median)  35.0%"));
  CHECK_THAT(text, Contains("node 1: 3 steps, median 10.0 ms/step"));
}

TEST_CASE("run report: a cut last line is skipped, a corrupt line is named", "[metrics][report]") {
  testing::ScratchDir dir("run-report-bad");
  write_steps(dir.path(), 0, {0.5});
  const auto file = dir.path() / "node-0" / "events.jsonl";
  std::ofstream(file, std::ios::app) << "{\"ts\":12,\"node\":0,\"event\":\"st";  // killed mid-write
  CHECK(metrics::read_run(dir.path()).nodes[0].steps.size() == 1);
  std::ofstream(file, std::ios::app) << "\n{\"ts\":13,\"event\":\"step\"}\n";
  CHECK_THROWS_WITH(metrics::read_run(dir.path()), Contains(file.string() + ":6: not an event"));
  CHECK_THROWS_WITH(metrics::read_run(dir.path() / "node-0"), Contains("no node-*/events.jsonl"));
}
