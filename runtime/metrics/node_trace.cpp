// Implementation of node_trace.hpp.
#include "runtime/metrics/node_trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>

#include "runtime/util/json_fields.hpp"

namespace dseek::metrics {

namespace {

double number_or(std::string_view fields, std::string_view key, double fallback) {
  const auto value = util::json_number_field(fields, key);
  return value && std::isfinite(*value) ? *value : fallback;
}

constexpr double kMarkUs = 1000;  // how wide an instant event is drawn (1 ms)

}  // namespace

NodeTrace::NodeTrace(std::filesystem::path file, int64_t node_id, int64_t flush_every)
    : file_(std::move(file)), node_(node_id), flush_every_(std::max<int64_t>(1, flush_every)) {}

NodeTrace::~NodeTrace() {
  try {
    flush();
  } catch (const std::exception&) {
    // A trace that cannot be written must not take the node down with it.
  }
}

void NodeTrace::keep(TraceSpan span) {
  if (spans_.size() >= kMaxSpans) {
    ++dropped_;
    return;
  }
  span.process = node_;
  span.duration_us = std::max(0.0, span.duration_us);
  spans_.push_back(std::move(span));
}

void NodeTrace::add(std::string name, std::string category, TraceLane lane, double start_us,
                    double duration_us) {
  keep({node_, static_cast<int64_t>(lane), std::move(name), std::move(category), start_us,
        duration_us, {}});
}

void NodeTrace::add_span(TraceSpan span) {
  std::lock_guard lock(mutex_);
  keep(std::move(span));
}

void NodeTrace::observe(std::string_view event, std::string_view fields, double now_us) {
  bool write = false;
  {
    std::lock_guard lock(mutex_);
    if (event == "step") {
      const double step_us = 1000 * number_or(fields, "step_ms", 0);
      const double start = now_us - step_us;
      const std::string step = std::to_string(static_cast<int64_t>(number_or(fields, "step", 0)));
      add("step " + step, "step", TraceLane::steps, start, step_us);
      double at = start;
      for (const auto& [key, name] : {std::pair{"data_wait_ms", "data wait"},
                                      std::pair{"offload_wait_ms", "offload wait"},
                                      std::pair{"compute_ms", "compute"},
                                      std::pair{"comm_ms", "exposed comm"}}) {
        const double us = 1000 * number_or(fields, key, 0);
        if (us <= 0) continue;
        add(std::string(name) + " " + step, name, TraceLane::step_parts, at, us);
        at += us;
      }
      write = ++steps_since_flush_ >= flush_every_;
    } else if (event == "checkpoint_committed") {
      const double write_us = 1000 * number_or(fields, "write_ms", 0);
      const double snapshot_us = 1000 * number_or(fields, "snapshot_ms", 0);
      const std::string step = std::to_string(static_cast<int64_t>(number_or(fields, "step", 0)));
      add("checkpoint write " + step, "checkpoint", TraceLane::checkpoints, now_us - write_us,
          write_us);
      add("checkpoint snapshot " + step, "checkpoint", TraceLane::checkpoints,
          now_us - write_us - snapshot_us, snapshot_us);
    } else if (event == "clock_offset") {
      has_offset_ = true;
      offset_us_ = number_or(fields, "offset_us", 0);
      offset_rtt_us_ = number_or(fields, "rtt_us", 0);
    } else if (event == "recovered") {
      const double us = 1000 * number_or(fields, "recovery_ms", 0);
      add("recovery", "recovery", TraceLane::events, now_us - us, us);
    } else if (event == "node_lost" || event == "fault_injected" || event == "epoch_started" ||
               event == "resumed" || event == "sdc_detected" || event == "actor_restarted") {
      std::string name(event);
      if (const auto kind = util::json_string_field(fields, "kind")) name += " " + *kind;
      add(name, "event", TraceLane::events, now_us, kMarkUs);
    }
    if (event == "train_done" || event == "train_stopped" || event == "node_stopping" ||
        event == "node_failed")
      write = true;
  }
  if (write) flush();
}

void NodeTrace::flush() {
  std::vector<TraceSpan> copy;
  std::vector<std::string> metadata;
  const std::string pid = std::to_string(node_);
  {
    std::lock_guard lock(mutex_);
    copy = spans_;
    steps_since_flush_ = 0;
    if (has_offset_)
      metadata.push_back("{\"ph\": \"M\", \"name\": \"clock_offset\", \"pid\": " + pid +
                         ", \"tid\": 0, \"args\": {\"offset_us\": " + std::to_string(offset_us_) +
                         ", \"rtt_us\": " + std::to_string(offset_rtt_us_) + "}}");
    if (dropped_ > 0)
      metadata.push_back("{\"ph\": \"M\", \"name\": \"spans_dropped\", \"pid\": " + pid +
                         ", \"tid\": 0, \"args\": {\"count\": " + std::to_string(dropped_) + "}}");
  }
  std::vector<std::string> names(static_cast<size_t>(node_ + 1));
  names[static_cast<size_t>(node_)] = "node " + std::to_string(node_);
  write_chrome_trace(file_, copy, names, metadata);
}

std::vector<TraceSpan> NodeTrace::spans() const {
  std::lock_guard lock(mutex_);
  return spans_;
}

std::shared_ptr<TraceRecorder> attach_node_trace(EventLog& events,
                                                 const std::filesystem::path& run_dir,
                                                 int64_t node_id) {
  auto recorder = std::make_shared<TraceRecorder>(node_id);
  auto trace = std::make_shared<NodeTrace>(
      run_dir / ("node-" + std::to_string(node_id)) / "trace.json", node_id);
  events.add_listener([trace, recorder](std::string_view event, std::string_view fields) {
    trace->observe(event, fields, recorder->now_us());
    if (event == "clock_offset") recorder->set_coordinator_offset(number_or(fields, "offset_us", 0));
  });
  recorder->set_listener(std::make_shared<const SpanListener>(
      [trace](TraceSpan span) { trace->add_span(std::move(span)); }));
  return recorder;
}

namespace {

// The number after `key` in `line` (a `"key": ` member), or nullopt.
std::optional<double> member(const std::string& line, const std::string& key, size_t* from = nullptr,
                             size_t* to = nullptr) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + key.size();
  char* end = nullptr;
  const double value = std::strtod(line.c_str() + begin, &end);
  if (end == line.c_str() + begin) return std::nullopt;
  if (from != nullptr) *from = begin;
  if (to != nullptr) *to = static_cast<size_t>(end - line.c_str());
  return value;
}

// The event lines of a trace write_chrome_trace wrote (one event a line), without their
// separating commas; process ids moved up by `pid_offset`; timestamps moved by the
// file's clock_offset metadata (`aligned` says whether it had one).
std::vector<std::string> trace_events(const std::filesystem::path& file, int64_t pid_offset,
                                      bool& aligned) {
  std::ifstream in(file);
  std::string line;
  if (!std::getline(in, line) || line.rfind("{\"displayTimeUnit\"", 0) != 0)
    throw std::runtime_error(file.string() + ":1: not a trace written by dseek");
  std::vector<std::string> out;
  double offset_us = 0;
  aligned = false;
  while (std::getline(in, line)) {
    if (line.rfind("{\"ph\"", 0) != 0) continue;
    if (!line.empty() && line.back() == ',') line.pop_back();
    if (line.find("\"name\": \"clock_offset\"") != std::string::npos) {
      if (const auto offset = member(line, "\"offset_us\": ")) {
        offset_us = *offset;
        aligned = true;
      }
    }
    if (pid_offset != 0) {
      size_t from = 0, to = 0;
      if (const auto pid = member(line, "\"pid\": ", &from, &to))
        line.replace(from, to - from, std::to_string(static_cast<long long>(*pid) + pid_offset));
    }
    out.push_back(std::move(line));
  }
  // The metadata comes before the spans, but a trace may have been cut anywhere: the
  // offset is applied once the whole file is read.
  if (aligned && offset_us != 0) {
    for (std::string& event : out) {
      size_t from = 0, to = 0;
      if (const auto ts = member(event, "\"ts\": ", &from, &to)) {
        char text[40];
        std::snprintf(text, sizeof text, "%.3f", *ts + offset_us);
        event.replace(from, to - from, text);
      }
    }
  }
  return out;
}

}  // namespace

MergedTrace merge_traces(const std::filesystem::path& run_dir, const std::filesystem::path& output) {
  std::vector<std::pair<long long, std::filesystem::path>> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, error)) {
    const auto name = entry.path().filename().string();
    const auto file = entry.path() / "trace.json";
    if (name.rfind("node-", 0) != 0 || !std::filesystem::exists(file)) continue;
    files.emplace_back(std::atoll(name.c_str() + 5), file);
  }
  if (error) throw std::runtime_error("cannot read " + run_dir.string() + ": " + error.message());
  if (files.empty())
    throw std::runtime_error(run_dir.string() + ": no node-*/trace.json to merge");
  std::sort(files.begin(), files.end());
  MergedTrace merged;
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  const auto append = [&](const std::vector<std::string>& lines) {
    for (const auto& line : lines) {
      if (!first) out += ",\n";
      first = false;
      out += line;
      merged.spans += line.find("\"ph\": \"X\"") != std::string::npos;
    }
  };
  for (const auto& [node, file] : files) {
    bool aligned = false;
    append(trace_events(file, 0, aligned));
    ++merged.nodes;
    merged.aligned += aligned;
  }
  const auto pipeline = run_dir / "trace.json";
  if (std::filesystem::exists(pipeline) && pipeline != output) {
    bool aligned = false;
    append(trace_events(pipeline, 1000, aligned));
    merged.pipeline = true;
  }
  out += "\n]}\n";
  const std::string temporary = output.string() + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << out;
    if (!file.flush()) throw std::runtime_error("cannot write " + temporary);
  }
  std::filesystem::rename(temporary, output, error);
  if (error) throw std::runtime_error("cannot write " + output.string() + ": " + error.message());
  return merged;
}

}  // namespace dseek::metrics
