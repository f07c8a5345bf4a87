#include "actors/cluster/node_agent.hpp"
#include "actors/cluster/clock_offset.hpp"
#include "actors/cluster/coordinator.hpp"

#include "actors/faults/crash_request.hpp"

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/node_id.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>

#include "runtime/metrics/trace_spans.hpp"

namespace dseek::actors {
namespace {

using clock = std::chrono::steady_clock;
// How long failed join attempts stay off the console (a coordinator takes a moment to
// start; every node started with it would otherwise report it).
constexpr auto kQuietJoin = std::chrono::seconds(3);
// Internal timers; they carry the join attempt generation so stale ones are ignored.
using retry_atom = caf::atom_constant<caf::atom("clretry")>;
using beat_atom = caf::atom_constant<caf::atom("clbeat")>;
// Rounds of the clock measurement after a join (clock_offset.hpp).
constexpr int kClockRounds = 8;

struct agent_state {
  explicit agent_state(caf::event_based_actor* s) : self(s) {}

  caf::event_based_actor* self;
  node_agent_config cfg;
  std::string secret;
  host_port target;
  caf::actor coord;
  std::uint32_t attempt = 0;     // failed attempts of the current join (at this candidate)
  std::uint32_t silent_candidates = 0;  // candidates in a row that did not answer at all
  clock::time_point join_started;  // when the current join began
  bool join_failures_shown = false;  // the console heard of this join's failures
  std::uint64_t generation = 0;  // bumped by every (re)join; stale callbacks check it
  bool joined = false;
  std::uint64_t epoch = 0;       // last epoch_started passed on
  std::uint64_t coordinator_id = 0;  // ... and the coordinator incarnation it came from
  std::uint64_t seq = 0;
  clock::time_point last_ack;
  clock::time_point last_beat;   // when on_beat last ran
  std::string leave_reason;      // why this node leaves ("": the job ended or was stopped)
  std::uint64_t ignored_messages = 0;  // membership messages not from the coordinator
  // When the oldest heartbeat sent since the last reply went out; unset while every
  // sent heartbeat is answered. Silence is counted from here, not from last_ack: a
  // heartbeat this node chose not to send (drop_messages) cannot go unanswered, so a
  // node that drops all of them looks hung to the coordinator but does not itself
  // declare the coordinator lost (the fault is one-sided, as its name says).
  std::optional<clock::time_point> unanswered_since;
  // The workers' requests passed on to the coordinator and not answered yet (to_coordinator),
  // by number: failed at once when the coordinator is lost or this actor stops, since
  // an answer can no longer come (a request in a connection that died is never answered,
  // and its requester would wait out its whole timeout: a rendezvous, 120 s).
  std::map<std::uint64_t, std::function<void(caf::error)>> pending_requests;
  std::uint64_t next_request = 0;

  static inline const char* name = "dseek.node_agent";

  template <class... Ts>
  void log(const char* fmt, Ts... xs) {
    if (!cfg.log) return;
    const std::string who = "dseek node " + std::to_string(cfg.node_id);
    log_line(who.c_str(), fmt, xs...);
  }

  template <class Event>
  void emit(Event ev) {
    if (cfg.listener)
      self->send(cfg.listener, std::move(ev));
  }

  std::string render(const caf::error& e) { return self->system().render(e); }

  // Fails every request of the workers still waiting for the coordinator's answer.
  void fail_pending(const std::string& why) {
    auto pending = std::move(pending_requests);
    pending_requests.clear();
    for (auto& [id, fail_request] : pending)
      fail_request(make_error(cluster_errc::stale_epoch, caf::make_message(why)));
  }

  void fail(cluster_errc code, const std::string& kind, const std::string& why) {
    fail_pending("the coordinator was lost before it answered: " + why);
    // The next incarnation of this agent walks on from the lost coordinator.
    if (cfg.succession && code == cluster_errc::coordinator_lost) cfg.succession->lost();
    log("%s (coordinator %s): %s", kind.c_str(), cfg.coordinator.c_str(), why.c_str());
    emit(agent_event{kind, cfg.node_id, cfg.coordinator, why});
    self->quit(make_error(code, caf::make_message(cfg.coordinator, why)));
  }

  // -- joining -------------------------------------------------------------------

  void start_join() {
    ++generation;
    joined = false;
    attempt = 0;
    join_started = clock::now();
    join_failures_shown = false;
    connect();
  }

  // A step of the join failed: retry, move on to the next candidate, or give up.
  void step_failed(const std::string& why) {
    ++attempt;
    const std::uint32_t here = cfg.succession ? cfg.succession->attempts_here() : 0;
    if (here > 0 && attempt >= here) {
      if (++silent_candidates > cfg.settings.join_retries) {
        fail(cluster_errc::connect_failed, "join_failed",
             "no coordinator of the job answered at " + std::to_string(silent_candidates) +
                 " candidates in a row (cluster.coordinator, cluster.backup_coordinators); "
                 "the last, " + cfg.coordinator + ": " + why);
        return;
      }
      return move_on(why);
    }
    if (here == 0 && attempt > cfg.settings.join_retries) {
      fail(cluster_errc::connect_failed, "join_failed",
           "cannot join the coordinator at " + cfg.coordinator + " after "
               + std::to_string(attempt) + " attempts: " + why);
      return;
    }
    // The coordinator is usually still starting: the console hears of failed attempts
    // only once they went on for kQuietJoin, then every 10th.
    const bool quiet = clock::now() - join_started < kQuietJoin;
    if (!quiet && (!join_failures_shown || attempt % 10 == 0)) {
      log("join attempt %u to %s failed (%s); retrying", attempt, cfg.coordinator.c_str(),
          why.c_str());
      join_failures_shown = true;
    }
    self->delayed_send(self, cfg.settings.join_retry_delay, retry_atom::value, generation);
  }

  // To the succession's next candidate (`why`: what the current one did).
  void move_on(const std::string& why) {
    const std::string from = cfg.coordinator;
    cfg.succession->advance();
    retarget();
    if (cfg.succession->failed_over() || clock::now() - join_started >= kQuietJoin)
      log("coordinator at %s: %s; trying %s", from.c_str(), why.c_str(), cfg.coordinator.c_str());
  }

  // Joins the succession's current candidate from the start, after join_retry_delay.
  void retarget() {
    if (coord) self->demonitor(coord);
    coord = nullptr;
    joined = false;
    attempt = 0;
    ++generation;
    const auto next = cfg.succession->current();
    cfg.coordinator = next.address;
    target = parse_host_port(next.address).value_or(host_port{});
    self->delayed_send(self, cfg.settings.join_retry_delay, retry_atom::value, generation);
  }

  void connect() {
    auto gen = generation;
    if (coord) {
      hello(gen);
      return;
    }
    // After a failover this node may be the candidate: its coordinator starts here.
    if (cfg.succession) {
      if (const auto why = cfg.succession->host_if_mine(self->system()); !why.empty()) {
        log("cannot run the job's coordinator at %s: %s", cfg.coordinator.c_str(), why.c_str());
        return move_on("not started here: " + why);
      }
      if (auto here = cfg.succession->local_current(self->system())) {
        coord = std::move(here);
        self->monitor(coord);
        hello(gen);
        return;
      }
    }
    auto mm = cfg.tls ? self->system().openssl_manager().actor_handle()
                      : self->system().middleman().actor_handle();
    self->request(mm, cfg.settings.connect_timeout, caf::connect_atom::value, target.host,
                  target.port)
        .then(
            [this, gen](const caf::node_id&, caf::strong_actor_ptr& ptr,
                        const std::set<std::string>&) {
              if (gen != generation)
                return;
              auto h = caf::actor_cast<caf::actor>(std::move(ptr));
              if (!h) {
                step_failed("no actor published at " + cfg.coordinator);
                return;
              }
              coord = std::move(h);
              self->monitor(coord);
              hello(gen);
            },
            [this, gen](caf::error& err) {
              if (gen == generation)
                step_failed("connect to " + cfg.coordinator + ": " + render(err)
                            + handshake_hint(err));
            });
  }

  // A connection closed during the handshake is, in practice, a TLS mismatch: CAF does
  // not say more, so the log says what to check.
  std::string handshake_hint(const caf::error& err) const {
    if (err != caf::sec::disconnect_during_handshake)
      return "";
    if (cfg.tls)
      return " (TLS handshake refused: the coordinator and this node need certificates "
             "signed by the same cluster CA, cluster.tls_ca)";
    return " (does the coordinator use TLS? then this node needs cluster.tls_ca, tls_cert "
           "and tls_key too)";
  }

  void hello(std::uint64_t gen) {
    std::string node_nonce = make_nonce();
    self->request(coord, cfg.settings.connect_timeout, hello_atom::value, cfg.node_id, node_nonce)
        .then(
            [this, gen, node_nonce](join_challenge& ch) {
              if (gen != generation)
                return;
              // Mutual challenge: whoever answers at the address must know the secret
              // before this node proves it knows it or takes orders from it.
              if (!verify_coordinator_mac(secret, node_nonce, ch.nonce, cfg.node_id,
                                          ch.coordinator_mac)) {
                auto err = make_error(
                    cluster_errc::auth_failed,
                    caf::make_message("the coordinator at " + cfg.coordinator + " did not "
                                      "prove the cluster secret (another job's coordinator "
                                      "at this address, a wrong secret here, or not a dseek "
                                      "coordinator): this node does not join it"));
                const auto why = render(err);
                log("%s", why.c_str());
                emit(join_refused{cfg.node_id, cfg.coordinator, why});
                self->quit(err);
                return;
              }
              join_proof p;
              p.node_id = cfg.node_id;
              p.host = cfg.advertise_host;
              p.mac = join_mac(secret, ch.nonce, cfg.node_id);
              p.nonce = std::move(ch.nonce);
              p.agent = caf::actor_cast<caf::actor>(self);
              prove(gen, std::move(p));
            },
            [this, gen](caf::error& err) {
              if (gen == generation)
                step_failed("hello: " + render(err));
            });
  }

  void prove(std::uint64_t gen, join_proof p) {
    self->request(coord, cfg.settings.connect_timeout, join_atom::value, std::move(p))
        .then(
            [this, gen](epoch_started& ev) {
              if (gen != generation)
                return;
              joined = true;
              silent_candidates = 0;
              if (cfg.succession) {
                if (const auto lost = cfg.succession->take_lost(); !lost.empty()) {
                  const auto why = "the coordinator at " + lost + " was lost; the job's "
                                   "coordinator is now the one at " + cfg.coordinator;
                  log("%s", why.c_str());
                  emit(agent_event{"coordinator_failover", cfg.node_id, cfg.coordinator, why});
                }
              }
              last_ack = clock::now();
              last_beat = last_ack;
              unanswered_since.reset();
              log("joined %s: epoch %llu, world %d", cfg.coordinator.c_str(),
                  static_cast<unsigned long long>(ev.epoch), ev.world_size);
              on_epoch(std::move(ev));
              self->send(self, beat_atom::value, generation);
              if (cfg.measure_clock) measure_clock(gen, 0, clock_offset_measured{});
            },
            [this, gen](caf::error& err) {
              if (gen != generation)
                return;
              // A coordinator waiting for a majority: the others may be at another
              // candidate (or cut off from this node).
              if (cfg.succession && err.category() == cluster_category &&
                  err.code() == static_cast<std::uint8_t>(cluster_errc::no_quorum)) {
                silent_candidates = 0;
                return move_on(render(err));
              }
              if (err.category() == cluster_category
                  && err.code() == static_cast<std::uint8_t>(cluster_errc::auth_failed)) {
                auto why = render(err);
                log("join refused by %s: %s", cfg.coordinator.c_str(), why.c_str());
                emit(join_refused{cfg.node_id, cfg.coordinator, why});
                self->quit(err);
                return;
              }
              // Our id is held by a live member: said at once (another job with this
              // secret and address, or a second node started with this id), retried
              // in case the holder is a dead incarnation not yet noticed.
              if (err.category() == cluster_category
                  && err.code() == static_cast<std::uint8_t>(cluster_errc::node_id_taken)
                  && attempt == 0)
                log("join refused by %s, retrying: %s", cfg.coordinator.c_str(),
                    render(err).c_str());
              step_failed("join: " + render(err));
            });
  }

  double trace_now_us() const { return metrics::trace_now_us(cfg.trace.get()); }

  // Round `round` of the clock measurement: t0 and t3 on this node's trace clock around
  // a request the coordinator answers with its own; the round with the smallest round
  // trip is kept (its offset is off by at most half of it).
  void measure_clock(std::uint64_t gen, int round, clock_offset_measured best) {
    if (gen != generation || !joined) return;
    if (round == kClockRounds) {
      if (best.rounds == 0) return log("no clock offset: no answer to %d rounds", kClockRounds);
      best.node_id = cfg.node_id;
      best.coordinator = cfg.coordinator;
      return emit(std::move(best));
    }
    const double t0 = trace_now_us();
    self->request(coord, cfg.settings.heartbeat_timeout, clock_atom::value)
        .then(
            [this, gen, round, best, t0](double coordinator_us) mutable {
              const double t3 = trace_now_us();
              const double rtt = t3 - t0;
              if (best.rounds == 0 || rtt < best.rtt_us) {
                best.rtt_us = rtt;
                best.offset_us = ((coordinator_us - t0) + (coordinator_us - t3)) / 2;
              }
              ++best.rounds;
              measure_clock(gen, round + 1, best);
            },
            [this, gen, round, best](caf::error&) { measure_clock(gen, round + 1, best); });
  }

  // -- membership ------------------------------------------------------------------

  void on_epoch(epoch_started ev) {
    if (ev.coordinator_id == coordinator_id && ev.epoch <= epoch)
      return; // already passed on (the join reply repeats the broadcast)
    epoch = ev.epoch;
    coordinator_id = ev.coordinator_id;
    emit(std::move(ev));
  }

  void on_beat(std::uint64_t gen) {
    if (gen != generation || !joined)
      return;
    auto now = clock::now();
    auto late = now - last_beat;
    last_beat = now;
    // This process itself was stopped or starved (the timer is late): the
    // coordinator's silence is not evidence. Ask it again first; if this node
    // was declared lost meanwhile, the reply says not_a_member.
    if (late > cfg.settings.heartbeat_interval + cfg.settings.heartbeat_timeout / 2) {
      last_ack = now;
      if (unanswered_since)
        unanswered_since = now;
    }
    if (unanswered_since && now - *unanswered_since > cfg.settings.heartbeat_timeout) {
      fail(cluster_errc::coordinator_lost, "coordinator_lost",
           "no heartbeat reply from " + cfg.coordinator + " for "
               + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    now - last_ack)
                                    .count())
               + " ms");
      return;
    }
    const auto this_seq = seq++;
    if (dropped(this_seq)) {
      self->delayed_send(self, cfg.settings.heartbeat_interval, beat_atom::value, gen);
      return;
    }
    if (!unanswered_since)
      unanswered_since = now;
    self->request(coord, cfg.settings.heartbeat_timeout, heartbeat_atom::value, cfg.node_id,
                  this_seq)
        .then(
            [this, gen](std::uint64_t) {
              if (gen != generation)
                return;
              last_ack = clock::now();
              unanswered_since.reset();
            },
            [this, gen](caf::error& err) {
              if (gen != generation || !joined)
                return;
              if (err.category() == cluster_category
                  && err.code() == static_cast<std::uint8_t>(cluster_errc::not_a_member)) {
                auto why = render(err);
                log("evicted by %s (%s); joining again", cfg.coordinator.c_str(), why.c_str());
                emit(agent_event{"evicted", cfg.node_id, cfg.coordinator, why});
                start_join();
              }
              // Timeouts: the silence check above decides.
            });
    self->delayed_send(self, cfg.settings.heartbeat_interval, beat_atom::value, gen);
  }

  // Deterministic: heartbeat `n` is dropped when the fractional part of n times the
  // golden ratio is below the fraction, which spreads the drops evenly.
  bool dropped(std::uint64_t n) const {
    if (!cfg.drop_heartbeats)
      return false;
    const double fraction = cfg.drop_heartbeats->load();
    if (fraction <= 0)
      return false;
    const double x = static_cast<double>(n) * 0.6180339887498949;
    return x - static_cast<double>(static_cast<std::uint64_t>(x)) < fraction;
  }

  void leave() {
    if (joined && coord) {
      log("leaving the job");
      self->send(coord, leave_atom::value, cfg.node_id, leave_reason);
    }
    joined = false;
  }

  // A request of this node's workers, passed on to the coordinator (which answers
  // them): only while this node is a member.
  // The answer comes back through this actor (not delegated), so that it can fail the
  // request when the coordinator is lost (pending_requests).
  template <class Result, class... Ts>
  caf::result<Result> to_coordinator(Ts&&... xs) {
    if (!joined || !coord)
      return make_error(cluster_errc::stale_epoch,
                        caf::make_message(std::string{"this node is not a member now"}));
    auto promise = self->make_response_promise<Result>();
    const std::uint64_t id = next_request++;
    pending_requests.emplace(id, [promise](caf::error error) mutable { promise.deliver(std::move(error)); });
    self->request(caf::actor_cast<coordinator_actor>(coord), caf::infinite, std::forward<Ts>(xs)...)
        .then(
            [this, id, promise](Result& answer) mutable {
              if (pending_requests.erase(id) != 0) promise.deliver(std::move(answer));
            },
            [this, id, promise](caf::error& error) mutable {
              if (pending_requests.erase(id) != 0) promise.deliver(std::move(error));
            });
    return promise;
  }

  bool from_coordinator() {
    const auto& sender = self->current_sender();
    if (coord && sender && caf::actor_cast<caf::actor>(sender) == coord) return true;
    ++ignored_messages;
    if (ignored_messages == 1 || ignored_messages % 100 == 0)
      log("ignored a membership message from an actor that is not the coordinator (%llu so far)",
          static_cast<unsigned long long>(ignored_messages));
    return false;
  }

  void on_down(const caf::down_msg& dm) {
    if (coord && dm.source == coord.address()) {
      coord = nullptr;
      if (!joined) {
        // Gone during the join (a coordinator restarting after a kill): a step of the
        // join that failed, retried after join_retry_delay like a refused connection;
        // quitting would restart this actor as fast as it fails, and its supervisor
        // gives up after a few.
        ++generation;  // the old attempt's replies no longer count
        step_failed("the coordinator at " + cfg.coordinator + " went down during the join: " +
                    render(dm.reason));
        return;
      }
      // A coordinator that lost its majority says so in its exit reason.
      const bool no_quorum = dm.reason.category() == cluster_category &&
                             dm.reason.code() == static_cast<std::uint8_t>(cluster_errc::no_quorum);
      fail(cluster_errc::coordinator_lost, no_quorum ? "no_quorum" : "coordinator_lost",
           "coordinator at " + cfg.coordinator + " is down: " + render(dm.reason));
    }
  }
};

caf::behavior agent_impl(caf::stateful_actor<agent_state>* self, node_agent_config cfg,
                         std::string secret, host_port target) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.secret = std::move(secret);
  st.target = std::move(target);
  if (st.cfg.succession) {
    st.cfg.coordinator = st.cfg.succession->current().address;
    st.target = parse_host_port(st.cfg.coordinator).value_or(host_port{});
  }
  self->set_down_handler([self](caf::down_msg& dm) { self->state.on_down(dm); });
  self->set_exit_handler([self](caf::exit_msg& em) {
    self->state.fail_pending("this node's membership actor stopped");
    if (em.reason == caf::exit_reason::user_shutdown || em.reason == caf::exit_reason::normal)
      self->state.leave();
    self->quit(em.reason);
  });
  st.start_join();
  return {
      // The node is about to leave because it failed: say why when it leaves, so that
      // the others treat it as a lost node rather than one that finished.
      [self](leave_atom, const std::string& why) { self->state.leave_reason = why; },
      [self](retry_atom, std::uint64_t gen) {
        if (gen == self->state.generation)
          self->state.connect();
      },
      [self](beat_atom, std::uint64_t gen) { self->state.on_beat(gen); },
      // Membership news only from the coordinator this node joined: anyone can reach a
      // node's registered actors once connected to one of its ports.
      [self](epoch_started& ev) {
        if (self->state.from_coordinator()) self->state.on_epoch(std::move(ev));
      },
      [self](node_joined& ev) {
        if (self->state.from_coordinator()) self->state.emit(std::move(ev));
      },
      [self](node_lost& ev) {
        if (self->state.from_coordinator()) self->state.emit(std::move(ev));
      },
      [self](rendezvous_atom, std::uint64_t epoch, std::int32_t rank, std::string& payload) {
        return self->state.to_coordinator<rendezvous_result>(rendezvous_atom::value, epoch, rank,
                                                             std::move(payload));
      },
      // The node's worker group restarted: the coordinator starts a new epoch.
      [self](restarted_atom, std::string& why) {
        auto& state = self->state;
        return state.to_coordinator<epoch_started>(restarted_atom::value, state.cfg.node_id,
                                                   std::move(why));
      },
      // The node's data plane could not connect in `epoch`: the coordinator re-plans.
      [self](replan_atom, std::uint64_t epoch, std::int64_t lost_node, std::string& why) {
        auto& state = self->state;
        return state.to_coordinator<epoch_started>(replan_atom::value, state.cfg.node_id, epoch,
                                                   lost_node, std::move(why));
      },
      // The SDC audit evicted this node, which hosts the coordinator: it stops training.
      [self](retire_atom, std::string& why) {
        auto& state = self->state;
        return state.to_coordinator<epoch_started>(retire_atom::value, state.cfg.node_id,
                                                   std::move(why));
      },
      [self](crash_atom) { crash_now("membership", self->state.cfg.crash); },
  };
}

} // namespace

caf::expected<caf::actor> spawn_node_agent(caf::actor_system& sys, node_agent_config cfg) {
  auto secret = resolve_secret(cfg.settings);
  if (!secret) return no_secret_error();
  auto target = parse_host_port(cfg.coordinator);
  if (!target || target->port == 0)
    return make_error(cluster_errc::connect_failed,
                      caf::make_message(cfg.coordinator,
                                        std::string{"not a host:port coordinator address"}));
  return sys.spawn(agent_impl, std::move(cfg), std::move(*secret), std::move(*target));
}

} // namespace dseek::actors
