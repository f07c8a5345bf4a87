// Implementation of trace_spans.hpp.
#include "runtime/metrics/trace_spans.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>

namespace dseek::metrics {

namespace {

std::atomic<double> clock_shift_us{0.0};
std::atomic<double> coordinator_offset_us{0.0};
std::atomic<std::shared_ptr<const SpanListener>> span_listener;

}  // namespace

double trace_clock_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::system_clock::now().time_since_epoch()).count() +
         clock_shift_us.load(std::memory_order_relaxed);
}

void set_trace_clock_node(int64_t node_id) {
  const char* value = std::getenv("DSEEK_TEST_TRACE_CLOCK_SHIFT");
  if (value == nullptr || *value == '\0') return;
  char* end = nullptr;
  const long long node = std::strtoll(value, &end, 10);
  if (end == value || *end != ':')
    throw std::runtime_error(std::string("DSEEK_TEST_TRACE_CLOCK_SHIFT=") + value +
                             ": not NODE:MICROSECONDS");
  const char* us_text = end + 1;
  const double us = std::strtod(us_text, &end);
  if (end == us_text || *end != '\0')
    throw std::runtime_error(std::string("DSEEK_TEST_TRACE_CLOCK_SHIFT=") + value +
                             ": not NODE:MICROSECONDS");
  if (node == node_id) clock_shift_us.store(us, std::memory_order_relaxed);
}

void set_coordinator_clock_offset(double offset_us) {
  coordinator_offset_us.store(offset_us, std::memory_order_relaxed);
}

double coordinator_clock_offset_us() { return coordinator_offset_us.load(std::memory_order_relaxed); }

void set_span_listener(std::shared_ptr<const SpanListener> listener) {
  span_listener.store(std::move(listener));
}

bool spans_wanted() { return span_listener.load(std::memory_order_relaxed) != nullptr; }

void record_span(std::string name, std::string category, TraceLane lane, double start_us,
                 double duration_us, std::string args) {
  const auto listener = span_listener.load();
  if (!listener) return;
  (*listener)(TraceSpan{0, static_cast<int64_t>(lane), std::move(name), std::move(category),
                        start_us, duration_us, std::move(args)});
}

ScopedSpan::ScopedSpan(const char* name, const char* category)
    : name_(name), category_(category), start_us_(spans_wanted() ? trace_clock_us() : -1) {}

ScopedSpan::~ScopedSpan() {
  if (start_us_ < 0) return;
  record_span(name_, category_, TraceLane::compute, start_us_, trace_clock_us() - start_us_);
}

}  // namespace dseek::metrics
