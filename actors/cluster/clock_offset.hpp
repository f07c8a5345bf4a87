// The clock measurement of a node agent after each join (node_agent.hpp), against the
// coordinator (coordinator.hpp); announced by register_cluster_types()
// (cluster_messages.hpp) with the other cluster messages.
//   agent -> coord  (clock_atom) -> double: the coordinator's trace clock
//                   (runtime/metrics/trace_spans.hpp, Unix us) when it answered
//   agent -> listener clock_offset_measured
#pragma once

#include <cstdint>
#include <string>

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

namespace dseek::actors {

using clock_atom = caf::atom_constant<caf::atom("clclock")>;

// offset_us = coordinator clock - this node's clock, from the round with the smallest
// round trip (rtt_us) of `rounds`: NTP's ((t1 - t0) + (t2 - t3)) / 2 with t1 = t2 (the
// coordinator reads its clock once per answer), off by at most half that round trip.
struct clock_offset_measured {
  std::int64_t node_id = 0;
  std::string coordinator;  // "host:port"
  double offset_us = 0;
  double rtt_us = 0;
  std::int32_t rounds = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, clock_offset_measured& x) {
  return f(caf::meta::type_name("clock_offset_measured"), x.node_id, x.coordinator, x.offset_us,
           x.rtt_us, x.rounds);
}

}  // namespace dseek::actors
