// `dseek trace merge RUN_DIR [--output FILE]`: one Chrome/Perfetto trace of every node of
// a run (node-*/trace.json, runtime/metrics/node_trace.hpp) and the pipeline's stage trace
// (RUN_DIR/trace.json, when the job had a pipeline), on one timeline: each node's spans
// moved by the clock offset it measured to the coordinator at join; default
// RUN_DIR/trace-merged.json. Open it in ui.perfetto.dev or chrome://tracing.
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "dseek/commands.hpp"
#include "runtime/metrics/node_trace.hpp"

namespace dseek::tool {

namespace {

const char* const kUsage =
    "usage: dseek trace merge RUN_DIR [--output FILE]\n"
    "  merges the traces of every node of a run (RUN_DIR/node-*/trace.json) and the\n"
    "  pipeline's stage trace (RUN_DIR/trace.json) into one trace on one timeline: the\n"
    "  coordinator's clock, each node's spans moved by the clock offset it measured at join\n"
    "  --output FILE  where to write it (default RUN_DIR/trace-merged.json)\n";

int run_trace(const Args& args) {
  if (args.empty()) throw cli::UsageError("a subcommand is required (merge)");
  if (args[0] != "merge")
    cli::unknown(args[0].rfind("-", 0) == 0 ? "option" : "subcommand", args[0], {"merge"});
  std::string run_dir, output;
  for (size_t i = 1; i < args.size(); ++i) {
    if (cli::take_value(args, i, "--output", output)) continue;
    if (args[i].rfind("-", 0) == 0) cli::unknown("option", args[i], {"--output", "--help"});
    if (!run_dir.empty()) throw cli::UsageError("unexpected argument '" + args[i] + "' (one RUN_DIR only)");
    run_dir = args[i];
  }
  if (run_dir.empty()) throw cli::UsageError("merge needs a RUN_DIR");
  if (!std::filesystem::is_directory(run_dir))
    throw std::runtime_error(run_dir + ": no such run directory");
  const std::filesystem::path file =
      output.empty() ? std::filesystem::path(run_dir) / "trace-merged.json" : std::filesystem::path(output);
  const auto merged = metrics::merge_traces(run_dir, file);
  std::printf("merged %zu node traces (%zu moved by their measured clock offset)%s, %zu spans: %s\n",
              merged.nodes, merged.aligned,
              merged.pipeline ? " and the pipeline's stage trace" : "", merged.spans,
              file.string().c_str());
  return 0;
}

}  // namespace

const Command& trace_command() {
  static const Command command{
      "trace", "  trace merge RUN_DIR [--output FILE]  every node's trace on one timeline\n",
      kUsage, run_trace};
  return command;
}

}  // namespace dseek::tool
