// The trace side of PipelineStageTrainer (pipeline/stage_trainer.hpp): recording a
// stage's spans during a step, filling the gaps with idle spans, and gathering every
// stage's spans as rows of doubles for the Chrome trace (metrics/chrome_trace.hpp), each
// moved onto the coordinator's clock by its node's measured offset.
#include <algorithm>
#include <utility>

#include "runtime/metrics/trace_spans.hpp"
#include "runtime/train/pipeline/stage_trainer.hpp"

namespace dseek::train {

void PipelineStageTrainer::record(SpanKind kind, int64_t micro_batch, int64_t chunk,
                                  double start_us, double end_us) {
  if (spans_.size() >= kMaxTraceSpans) return;
  spans_.push_back({kind, micro_batch, chunk, start_us, end_us});
}

void PipelineStageTrainer::add_idle_spans(size_t first_span, double start_us, double end_us) {
  std::vector<std::pair<double, double>> busy;
  for (size_t i = first_span; i < spans_.size(); ++i) {
    const SpanKind kind = spans_[i].kind;
    // Waiting on a receive is idle time (the trace shows both, the recv on top).
    if (kind != SpanKind::recv_activation && kind != SpanKind::recv_gradient)
      busy.emplace_back(spans_[i].start_us, spans_[i].end_us);
  }
  std::sort(busy.begin(), busy.end());
  double cursor = start_us;
  constexpr double kMinIdleUs = 5.0;  // gaps of bookkeeping between spans are not bubbles
  for (const auto& [begin, finish] : busy) {
    if (begin - cursor > kMinIdleUs) record(SpanKind::idle, -1, -1, cursor, begin);
    cursor = std::max(cursor, finish);
  }
  if (end_us - cursor > kMinIdleUs) record(SpanKind::idle, -1, -1, cursor, end_us);
}

std::vector<metrics::TraceSpan> PipelineStageTrainer::gather_trace_spans() {
  const int64_t P = plan_.shape.stages;
  std::vector<double> counts(static_cast<size_t>(P), 0.0);
  counts[static_cast<size_t>(stage_)] = static_cast<double>(spans_.size());
  links_.sum_over_stages(counts);
  size_t offset = 0, total = 0;
  for (int64_t s = 0; s < P; ++s) {
    if (s < stage_) offset += static_cast<size_t>(counts[static_cast<size_t>(s)]);
    total += static_cast<size_t>(counts[static_cast<size_t>(s)]);
  }
  // Each stage fills its own rows; the others' are zeros, so the sum is a gather.
  // Each on the coordinator's clock: the stages' nodes may be hosts whose clocks differ.
  const double to_coordinator_us = trace_ ? trace_->coordinator_offset_us() : 0.0;
  std::vector<double> rows(total * kSpanDoubles, 0.0);
  for (size_t i = 0; i < spans_.size(); ++i) {
    double* row = rows.data() + (offset + i) * kSpanDoubles;
    row[0] = static_cast<double>(spans_[i].kind);
    row[1] = static_cast<double>(spans_[i].micro_batch);
    row[2] = static_cast<double>(spans_[i].chunk);
    row[3] = spans_[i].start_us + to_coordinator_us;
    row[4] = spans_[i].end_us + to_coordinator_us;
  }
  links_.sum_over_stages(rows);
  std::vector<metrics::TraceSpan> spans;
  size_t row_index = 0;
  for (int64_t s = 0; s < P; ++s) {
    for (size_t i = 0; i < static_cast<size_t>(counts[static_cast<size_t>(s)]); ++i, ++row_index) {
      const double* row = rows.data() + row_index * kSpanDoubles;
      static constexpr const char* kNames[] = {"forward", "backward", "send activation",
                                               "send gradient", "recv activation",
                                               "recv gradient", "idle"};
      static constexpr const char* kCategories[] = {"forward", "backward", "send", "send",
                                                    "recv", "recv", "idle"};
      const auto kind = static_cast<size_t>(row[0]);
      metrics::TraceSpan span;
      span.process = s;
      span.name = kNames[kind];
      span.category = kCategories[kind];
      // Sends and receives on their own lane: a receive wait overlaps the idle span.
      span.thread = span.category == "send" || span.category == "recv" ? 1 : 0;
      if (row[1] >= 0) {
        span.name += " mb " + std::to_string(static_cast<int64_t>(row[1]));
        if (plan_.shape.chunks() > 1) {
          span.name += " chunk ";
          span.name += std::to_string(static_cast<int64_t>(row[2]));
        }
      }
      span.start_us = row[3];
      span.duration_us = row[4] - row[3];
      spans.push_back(std::move(span));
    }
  }
  return spans;
}

}  // namespace dseek::train
