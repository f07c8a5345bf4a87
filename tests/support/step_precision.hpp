// What the mixed-precision checkpoint tests compare step by step: from a run's step events
// (events.jsonl lines), whether each step was skipped by the fp8 loss scaler and the loss
// scale it reported, so a resumed run can be held to the uninterrupted run's pattern.
#pragma once

#include <string>
#include <vector>

namespace dseek::testing {

struct StepPrecision {
  std::string skips;                // '1' skipped, '0' applied, one per step event
  std::vector<std::string> scales;  // the loss_scale field of each step event, as written
};

inline StepPrecision step_precision(const std::vector<std::string>& lines) {
  StepPrecision record;
  const std::string key = "\"loss_scale\":";
  for (const std::string& line : lines) {
    if (line.find("\"event\":\"step\"") == std::string::npos) continue;
    record.skips += line.find("\"skipped\":true") != std::string::npos ? '1' : '0';
    const size_t at = line.find(key);
    const size_t begin = at == std::string::npos ? 0 : at + key.size();
    record.scales.push_back(at == std::string::npos
                                ? "none"
                                : line.substr(begin, line.find_first_of(",}", begin) - begin));
  }
  return record;
}

// Steps [first, end) of `record`.
inline StepPrecision steps_from(const StepPrecision& record, size_t first) {
  StepPrecision rest;
  if (first > record.skips.size()) return rest;
  rest.skips = record.skips.substr(first);
  rest.scales.assign(record.scales.begin() + static_cast<std::ptrdiff_t>(first), record.scales.end());
  return rest;
}

}  // namespace dseek::testing
