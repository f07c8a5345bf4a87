// `dseek report RUN_DIR [--output FILE.html]`: reads the run's events (every node's
// events.jsonl), prints the plain-text summary of the five measures and the nodes, and
// writes the self-contained HTML report (runtime/metrics/html_report.hpp), by default
// RUN_DIR/report.html. The file is written whole to a temporary name and renamed, so a
// failed write leaves any previous report as it was.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "dseek/commands.hpp"
#include "runtime/metrics/html_report.hpp"
#include "runtime/metrics/run_record.hpp"

namespace dseek::tool {

namespace {

const char* const kUsage =
    "usage: dseek report RUN_DIR [--output FILE.html]\n"
    "  summarizes a run from its events (RUN_DIR/node-*/events.jsonl): the five measures\n"
    "  (compute utilization, communication share, memory, convergence, scaling\n"
    "  efficiency) and each node on the terminal, and a self-contained HTML page with the\n"
    "  curves, the step-time breakdown, the per-node comparison, the timeline of faults,\n"
    "  recoveries, epochs and checkpoints, and the config\n"
    "  --output FILE.html  where to write the page (default RUN_DIR/report.html)\n";

void write_whole(const std::filesystem::path& file, const std::string& text) {
  const auto temporary = file.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + temporary);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + temporary);
  }
  std::error_code error;
  std::filesystem::rename(temporary, file, error);
  if (error) throw std::runtime_error("cannot write " + file.string() + ": " + error.message());
}

int run_report(const Args& args) {
  std::string run_dir, output;
  for (size_t i = 0; i < args.size(); ++i) {
    if (cli::take_value(args, i, "--output", output)) continue;
    if (args[i].rfind("-", 0) == 0) cli::unknown("option", args[i], {"--output", "--help"});
    if (!run_dir.empty()) throw cli::UsageError("unexpected argument '" + args[i] + "' (one RUN_DIR only)");
    run_dir = args[i];
  }
  if (run_dir.empty()) throw cli::UsageError("a RUN_DIR is required");
  if (!std::filesystem::is_directory(run_dir))
    throw std::runtime_error(run_dir + ": no such run directory");
  const auto run = metrics::read_run(run_dir);
  const std::filesystem::path file = output.empty() ? std::filesystem::path(run_dir) / "report.html"
                                                    : std::filesystem::path(output);
  write_whole(file, metrics::render_html_report(run));
  std::fputs(metrics::render_text_summary(run).c_str(), stdout);
  std::printf("report: %s\n", file.string().c_str());
  return 0;
}

}  // namespace

const Command& report_command() {
  static const Command command{
      "report",
      "  report RUN_DIR [--output FILE]  the five measures of a run, and an HTML report\n",
      kUsage, run_report};
  return command;
}

}  // namespace dseek::tool
