// Every operation of the data plane as a span of the node's trace: the communicator's
// WorkObserver (comm/types.hpp, CommOptions::observer) feeding the node's TraceRecorder
// (runtime/metrics/trace_spans.hpp) on the comm lane, named by the operation
// ("all_reduce", "send", "all_gather", ...), with its full description and the bytes it
// sent and received as the span's args. Its start is the operation's issue, its end its
// completion, so a collective overlapped with backward shows over the backward span of
// the compute lane. The node's data plane link installs it on every communicator it
// connects; without a span listener it records nothing.
#pragma once

#include <memory>

#include "comm/types.hpp"
#include "runtime/metrics/trace_spans.hpp"

namespace dseek::dist {

// The observer that records into `trace` (null: none).
std::shared_ptr<const comm::WorkObserver> collective_spans(
    std::shared_ptr<const metrics::TraceRecorder> trace);

}  // namespace dseek::dist
