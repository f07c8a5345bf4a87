// `dseek report`'s output: one self-contained HTML page of a run (inline SVG, CSS and a
// few lines of JavaScript, nothing fetched) with the five measures, the loss and
// validation curves, tokens/s and MFU over the steps, the step-time breakdown, the
// per-node comparison, the timeline of faults, recoveries, epochs and checkpoints, and
// the config; and the plain-text summary printed on the terminal. Every plotted series
// carries its values in data attributes (data-x, data-y: the events' numbers, exactly)
// so that a test can compare the page with events.jsonl.
#pragma once

#include <string>

#include "runtime/metrics/run_record.hpp"

namespace dseek::metrics {

// The five measures of a run, over every node's steps (medians; memory: the largest).
struct RunMeasures {
  std::optional<double> mfu, comm_share, memory_fraction, peak_memory_bytes;
  std::optional<double> scaling_efficiency, tokens_per_s_per_node, bubble;
  std::optional<double> final_loss, final_val_loss, first_loss;
  int64_t steps = 0;  // the most steps any node completed
};
RunMeasures run_measures(const RunRecord& run);

std::string render_html_report(const RunRecord& run);
std::string render_text_summary(const RunRecord& run);

}  // namespace dseek::metrics
