// A finished (or killed) run read back from its events: RUN_DIR/node-*/events.jsonl,
// every node's steps with their measures, evaluations, the events of its timeline
// (faults, lost nodes, recoveries, epochs, checkpoints) and the basis and config of its
// "measures" event. `dseek report` renders it (html_report.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dseek::metrics {

// One step event's numbers (NaN where the event has null; absent fields: nullopt).
struct StepRecord {
  double ts = 0;
  double step = 0;
  std::map<std::string, double> fields;  // every numeric field of the event
  std::optional<double> get(const std::string& key) const;
};

// An event of the timeline: its name, time and the event's whole line.
struct TimelineEvent {
  double ts = 0;
  std::string event;
  std::string detail;  // the fields that say what happened, "key=value ..."
};

struct NodeRecord {
  int64_t node = 0;
  std::vector<StepRecord> steps;
  std::vector<std::pair<double, double>> evals;  // (step, val_loss)
  std::vector<TimelineEvent> timeline;
  std::string measures_line;  // the "measures" event (basis, config); "" if none
  std::string run_started_line;
  std::string end_line;  // train_done or train_stopped; "" when the node never finished
};

struct RunRecord {
  std::filesystem::path run_dir;
  std::vector<NodeRecord> nodes;  // by node id
  double first_ts = 0;            // the earliest event of any node
};

// The events that make the timeline.
bool is_timeline_event(const std::string& event);

// Reads every node-*/events.jsonl of `run_dir`. Throws std::runtime_error naming the
// directory when it has no node's events, and naming file:line for a line that is not
// an event (a last line cut short by a killed node is skipped).
RunRecord read_run(const std::filesystem::path& run_dir);

}  // namespace dseek::metrics
