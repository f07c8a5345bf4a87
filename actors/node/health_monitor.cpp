// Implementation of health_monitor.hpp.
#include "actors/node/health_monitor.hpp"

#include <algorithm>
#include <cstdint>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/faults/crash_request.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::actors {

namespace {

using clock = std::chrono::steady_clock;
using check_atom = caf::atom_constant<caf::atom("dshcheck")>;
// The interface and the monitor's own timer.
using health_monitor_impl = health_monitor_actor::extend<caf::reacts_to<check_atom>>;

struct health_state {
  health_settings settings;
  std::int64_t last_step = 0;
  clock::time_point last_progress{};
  std::chrono::milliseconds slowest_step{0};
  bool seen_step = false;
  bool stalled = false;
  bool paused = false;  // the training is paused: no step is due
  static inline const char* name = "dseek.health_monitor";
};

std::int64_t ms(clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

health_monitor_impl::behavior_type health_monitor(
    health_monitor_impl::stateful_pointer<health_state> self, health_settings settings,
    crash_requests crash) {
  names::register_as(self, names::health_monitor);
  self->state.settings = settings;
  self->delayed_send(self, settings.check_interval, check_atom::value);
  return {
      [self](const step_progress& p) {
        auto& st = self->state;
        const auto now = clock::now();
        if (st.seen_step) {
          // Remember how slow steps get, decaying so that one slow step long ago (a
          // checkpoint, an epoch change) does not hide a stall forever.
          auto took = std::chrono::duration_cast<std::chrono::milliseconds>(now - st.last_progress);
          st.slowest_step = std::max(took, st.slowest_step * 9 / 10);
        }
        if (st.stalled) {
          st.stalled = false;
          names::send_to(self->system(), names::metrics_exporter,
                         node_event{"worker_resumed",
                                    util::JsonLine().add("step", p.step)
                                        .add("stalled_ms", ms(now - st.last_progress)).str()});
        }
        st.seen_step = true;
        st.last_step = p.step;
        st.last_progress = now;
      },
      [self](const training_paused& p) {
        // A pause is no stall; the next step is due from the end of the pause.
        auto& st = self->state;
        st.paused = p.paused;
        st.last_progress = clock::now();
      },
      [self](check_atom) {
        auto& st = self->state;
        self->delayed_send(self, st.settings.check_interval, check_atom::value);
        if (!st.seen_step || st.stalled || st.paused) return;
        const auto limit = std::max(st.settings.min_stall,
                                    std::chrono::milliseconds(static_cast<int64_t>(
                                        st.settings.stall_factor *
                                        static_cast<double>(st.slowest_step.count()))));
        const auto quiet = clock::now() - st.last_progress;
        if (quiet > limit) {
          st.stalled = true;
          names::send_to(self->system(), names::metrics_exporter,
                         node_event{"worker_stalled",
                                    util::JsonLine().add("last_step", st.last_step)
                                        .add("quiet_ms", ms(quiet))
                                        .add("limit_ms", static_cast<int64_t>(limit.count()))
                                        .str()});
        }
      },
      [self](const sdc_report& report) {
        const auto& d = report.disagreement;
        names::send_to(self->system(), names::metrics_exporter,
                       node_event{"sdc_detected", train::sdc_detected_fields(d).str()});
        // This replica is off the majority: the node leaves the job for it. The peers go
        // on without it (they are told by the coordinator as of a lost node).
        if (d.this_replica)
          names::send_to(self->system(), names::membership, leave_atom::value,
                         std::string(train::ReplicaMismatch(d.step, d.checked, d.ranks).what()));
        return caf::ok_atom::value;
      },
      [self](caf::get_atom) { return self->state.last_step; },
      [crash](crash_atom) { crash_now("health_monitor", crash); },
  };
}

}  // namespace

caf::actor spawn_health_monitor(caf::actor_system& sys, health_settings settings,
                                crash_requests crash) {
  return caf::actor_cast<caf::actor>(sys.spawn(health_monitor, settings, crash));
}

health_monitor_actor health_monitor_of(caf::actor_system& sys) {
  return caf::actor_cast<health_monitor_actor>(names::lookup(sys, names::health_monitor));
}

std::function<void(const train::ReplicaDisagreement&)> sdc_reporter(
    caf::actor_system& sys, std::shared_ptr<metrics::EventLog> events) {
  return [&sys, events](const train::ReplicaDisagreement& disagreement) {
    bool taken = false;
    if (auto monitor = health_monitor_of(sys)) {
      caf::scoped_actor self{sys};
      self->request(monitor, std::chrono::seconds(2), sdc_report{disagreement})
          .receive([&](caf::ok_atom) { taken = true; }, [](caf::error&) {});
    }
    if (!taken) events->emit("sdc_detected", train::sdc_detected_fields(disagreement));
  };
}

}  // namespace dseek::actors
