// Implementation of trace_spans.hpp.
#include "runtime/metrics/trace_spans.hpp"

#include <chrono>
#include <cstdlib>
#include <stdexcept>

namespace dseek::metrics {

namespace {

// The shift DSEEK_TEST_TRACE_CLOCK_SHIFT gives node `node_id` (0 where it names another).
double clock_shift_of(int64_t node_id) {
  const char* value = std::getenv("DSEEK_TEST_TRACE_CLOCK_SHIFT");
  if (value == nullptr || *value == '\0' || node_id < 0) return 0;
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
  return node == node_id ? us : 0;
}

}  // namespace

double system_clock_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

TraceRecorder::TraceRecorder(int64_t node_id) : shift_us_(clock_shift_of(node_id)) {}

void TraceRecorder::record(std::string name, std::string category, TraceLane lane,
                           double start_us, double duration_us, std::string args) const {
  const auto listener = listener_.load();
  if (!listener) return;
  (*listener)(TraceSpan{0, static_cast<int64_t>(lane), std::move(name), std::move(category),
                        start_us, duration_us, std::move(args)});
}

}  // namespace dseek::metrics
