// Every operation of the data plane as a span of the node's trace: comm's WorkObserver
// (comm/work_observer.hpp) feeding metrics::record_span (runtime/metrics/trace_spans.hpp) on the
// comm lane, named by the operation ("all_reduce", "send", "all_gather", ...), with its
// full description and the bytes it sent and received as the span's args. Its start is
// the operation's issue, its end its completion, so a collective overlapped with
// backward shows over the backward span of the compute lane. Installed once per process
// (dseek-node does it at start); without a span listener it records nothing.
#pragma once

namespace dseek::dist {

void trace_collectives();

}  // namespace dseek::dist
