// Implementation of trace_collectives.hpp.
#include "dist/trace_collectives.hpp"

#include <memory>
#include <string>

#include "comm/work_observer.hpp"
#include "runtime/metrics/trace_spans.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::dist {

void trace_collectives() {
  comm::set_work_observer(std::make_shared<const comm::WorkObserver>(
      [](const comm::WorkState& work, std::chrono::nanoseconds took) {
        if (!metrics::spans_wanted()) return;
        const double took_us = std::chrono::duration<double, std::micro>(took).count();
        const std::string& full = work.name();
        // "all_reduce(1024 f32 sum) epoch 1 rank 0/2" -> "all_reduce"
        const std::string name = full.substr(0, full.find_first_of("( "));
        std::string args = "\"op\": " + util::json_quote(full) +
                           ", \"bytes_sent\": " + std::to_string(work.bytes_sent()) +
                           ", \"bytes_received\": " + std::to_string(work.bytes_received());
        if (work.error()) args += ", \"failed\": true";
        metrics::record_span(name, "comm", metrics::TraceLane::comm,
                             metrics::trace_clock_us() - took_us, took_us, std::move(args));
      }));
}

}  // namespace dseek::dist
