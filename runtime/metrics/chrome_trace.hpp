// A Chrome trace file (the JSON Trace Event Format that chrome://tracing and Perfetto
// load): complete events ("ph": "X") with a process per pipeline stage, a thread per
// lane, a name, a category and microsecond timestamps. The pipeline run writes its
// stages' forward, backward, send, recv and idle spans to RUN_DIR/trace.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dseek::metrics {

struct TraceSpan {
  int64_t process = 0;  // "pid": the pipeline stage
  int64_t thread = 0;   // "tid"
  std::string name;     // "forward mb 3", ...
  std::string category; // forward, backward, send, recv, idle
  double start_us = 0;  // since the Unix epoch: a trace clock (trace_spans.hpp)
  double duration_us = 0;
  std::string args;     // members of the event's "args" object ("\"bytes\": 12"), or ""
};

// Writes {"traceEvents": [...], "displayTimeUnit": "ms"} with a process_name metadata
// event per non-empty entry of `process_names` (index = pid), then the `metadata` lines
// (whole "ph": "M" events), one event a line, whole to a
// temporary file renamed into place. Throws std::runtime_error when the
// file cannot be written.
void write_chrome_trace(const std::filesystem::path& path, const std::vector<TraceSpan>& spans,
                        const std::vector<std::string>& process_names,
                        const std::vector<std::string>& metadata = {});

}  // namespace dseek::metrics
