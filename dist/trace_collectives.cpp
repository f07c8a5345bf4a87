// Implementation of trace_collectives.hpp.
#include "dist/trace_collectives.hpp"

#include <string>

#include "comm/work.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::dist {

std::shared_ptr<const comm::WorkObserver> collective_spans(
    std::shared_ptr<const metrics::TraceRecorder> trace) {
  if (!trace) return nullptr;
  return std::make_shared<const comm::WorkObserver>(
      [trace](const comm::WorkState& work, std::chrono::nanoseconds took) {
        if (!trace->spans_wanted()) return;
        const double took_us = std::chrono::duration<double, std::micro>(took).count();
        const std::string& full = work.name();
        // "all_reduce(1024 f32 sum) epoch 1 rank 0/2" -> "all_reduce"
        const std::string name = full.substr(0, full.find_first_of("( "));
        std::string args = "\"op\": " + util::json_quote(full) +
                           ", \"bytes_sent\": " + std::to_string(work.bytes_sent()) +
                           ", \"bytes_received\": " + std::to_string(work.bytes_received());
        if (work.error()) args += ", \"failed\": true";
        trace->record(name, "comm", metrics::TraceLane::comm, trace->now_us() - took_us, took_us,
                      std::move(args));
      });
}

}  // namespace dseek::dist
