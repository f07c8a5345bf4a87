// Implementation of run_record.hpp.
#include "runtime/metrics/run_record.hpp"

#include <algorithm>
#include <fstream>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "runtime/util/json_fields.hpp"

namespace dseek::metrics {

namespace {

// The fields of a step event that are numbers (the keys of JsonLine's flat object).
std::map<std::string, double> numeric_fields(const std::string& line) {
  std::map<std::string, double> out;
  // Keys: every "name": at the top level. json_number_field skips nested values, so
  // asking it for each quoted word followed by ':' finds exactly the top-level numbers.
  size_t at = 0;
  while ((at = line.find('"', at)) != std::string::npos) {
    const size_t end = line.find('"', at + 1);
    if (end == std::string::npos) break;
    if (end + 1 < line.size() && line[end + 1] == ':') {
      const std::string key = line.substr(at + 1, end - at - 1);
      if (const auto value = util::json_number_field(line, key)) out[key] = *value;
    }
    at = end + 1;
  }
  return out;
}

std::string detail_of(const std::string& line) {
  static const char* const keys[] = {"kind", "lost_node", "reason", "epoch", "world_size",
                                     "members", "from_step", "source", "step", "actor",
                                     "error", "recovery_ms"};
  std::string detail;
  for (const char* key : keys) {
    std::string value;
    if (const auto text = util::json_string_field(line, key)) {
      value = *text;
    } else if (const auto number = util::json_number_field(line, key)) {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%.10g", *number);
      value = buffer;
    } else {
      continue;
    }
    if (!detail.empty()) detail += ' ';
    detail += std::string(key) + "=" + value;
  }
  return detail;
}

NodeRecord read_node(const std::filesystem::path& file, int64_t node) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  NodeRecord record;
  record.node = node;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t start = 0;
  int64_t number = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool whole = end != std::string::npos;
    if (!whole) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (line.empty()) continue;
    const auto event = util::json_string_field(line, "event");
    const auto ts = util::json_number_field(line, "ts");
    if (!event || !ts) {
      if (!whole) break;  // the last line of a killed node, cut short
      throw std::runtime_error(file.string() + ":" + std::to_string(number) +
                               ": not an event (a JSON object with \"ts\" and \"event\")");
    }
    if (*event == "step") {
      StepRecord step;
      step.ts = *ts;
      step.fields = numeric_fields(line);
      step.step = step.get("step").value_or(0);
      record.steps.push_back(std::move(step));
    } else if (*event == "eval") {
      const auto step = util::json_number_field(line, "step");
      const auto loss = util::json_number_field(line, "val_loss");
      if (step && loss) record.evals.emplace_back(*step, *loss);
    } else if (*event == "measures") {
      record.measures_line = line;
    } else if (*event == "run_started") {
      record.run_started_line = line;
    }
    if (*event == "train_done" || *event == "train_stopped") record.end_line = line;
    if (is_timeline_event(*event)) record.timeline.push_back({*ts, *event, detail_of(line)});
  }
  return record;
}

}  // namespace

std::optional<double> StepRecord::get(const std::string& key) const {
  const auto it = fields.find(key);
  if (it == fields.end()) return std::nullopt;
  return it->second;
}

bool is_timeline_event(const std::string& event) {
  static const char* const kinds[] = {
      "node_started", "epoch_started", "node_lost", "recovered", "resumed",
      "checkpoint_committed", "checkpoint_failed", "fault_injected", "actor_restarted",
      "sdc_detected", "step_skipped", "training_interrupted", "train_done", "train_stopped",
      "node_failed"};
  return std::find(std::begin(kinds), std::end(kinds), event) != std::end(kinds);
}

RunRecord read_run(const std::filesystem::path& run_dir) {
  RunRecord run;
  run.run_dir = run_dir;
  std::error_code error;
  std::vector<std::pair<int64_t, std::filesystem::path>> files;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, error)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("node-", 0) != 0) continue;
    const auto file = entry.path() / "events.jsonl";
    if (!std::filesystem::exists(file)) continue;
    char* rest = nullptr;
    const long long id = std::strtoll(name.c_str() + 5, &rest, 10);
    if (rest == name.c_str() + 5 || *rest != '\0') continue;
    files.emplace_back(id, file);
  }
  if (error) throw std::runtime_error("cannot read " + run_dir.string() + ": " + error.message());
  if (files.empty())
    throw std::runtime_error(run_dir.string() +
                             ": no node-*/events.jsonl (not a run directory of dseek)");
  std::sort(files.begin(), files.end());
  run.first_ts = std::numeric_limits<double>::infinity();
  for (const auto& [id, file] : files) {
    run.nodes.push_back(read_node(file, id));
    const auto& node = run.nodes.back();
    if (!node.steps.empty()) run.first_ts = std::min(run.first_ts, node.steps.front().ts);
    if (!node.timeline.empty()) run.first_ts = std::min(run.first_ts, node.timeline.front().ts);
  }
  if (!std::isfinite(run.first_ts)) run.first_ts = 0;
  return run;
}

}  // namespace dseek::metrics
