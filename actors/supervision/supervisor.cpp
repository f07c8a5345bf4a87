#include "actors/supervision/supervisor.hpp"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>

#include "actors/supervision/restart_intensity.hpp"

namespace dseek::actors {
namespace {

// Internal: a stop step's timer fired (carries the step's token).
using stop_timer_atom = caf::atom_constant<caf::atom("suptimer")>;

using clock = restart_intensity::clock;

struct child_entry {
  std::uint64_t id = 0;
  child_spec spec;
  caf::actor handle; // valid from a successful start until its down_msg
  std::uint32_t restarts = 0;
};

// Children stopped one at a time in the order of `queue`, then `done`.
struct stop_op {
  std::deque<std::uint64_t> queue;
  std::uint64_t current = 0; // id of the child being stopped, 0 = none
  bool killed = false;       // exit_reason::kill already sent to `current`
  std::uint64_t token = 0;   // the timer of the current step
  std::function<void()> done;
};

struct supervisor_state {
  explicit supervisor_state(caf::event_based_actor* s) : self(s) {}

  caf::event_based_actor* self;
  supervisor_config cfg; // its `children` moves into `children` below
  std::vector<child_entry> children;
  std::uint64_t next_id = 1;
  std::uint64_t next_token = 1;
  restart_intensity intensity{3, std::chrono::seconds(5)};
  std::optional<stop_op> op;
  std::deque<std::function<void()>> pending; // run while no stop_op is active
  bool terminating = false;                  // giving up or shutting down
  bool shutdown_started = false;
  caf::error final_reason;
  std::vector<caf::response_promise> shutdown_promises;
  // Live children, for the functor that kills them if the supervisor dies
  // without an orderly stop (killed, crashed).
  std::shared_ptr<std::vector<caf::actor>> live = std::make_shared<std::vector<caf::actor>>();

  static inline const char* name = "dseek.supervisor";

  // -- lookup ------------------------------------------------------------------

  child_entry* find(std::uint64_t id) {
    for (auto& c : children)
      if (c.id == id)
        return &c;
    return nullptr;
  }

  child_entry* find(const std::string& child) {
    for (auto& c : children)
      if (c.spec.name == child)
        return &c;
    return nullptr;
  }

  child_entry* find(const caf::actor_addr& addr) {
    for (auto& c : children)
      if (c.handle && c.handle.address() == addr)
        return &c;
    return nullptr;
  }

  void remove(std::uint64_t id) {
    children.erase(std::remove_if(children.begin(), children.end(),
                                  [id](const child_entry& c) { return c.id == id; }),
                   children.end());
  }

  void sync_live() {
    live->clear();
    for (auto& c : children)
      if (c.handle)
        live->push_back(c.handle);
  }

  template <class Event>
  void emit(Event ev) {
    if (cfg.listener)
      self->send(cfg.listener, std::move(ev));
  }

  // -- starting ------------------------------------------------------------------

  // Spawns and monitors the child. Returns the error of a failed start.
  caf::error spawn_child(child_entry& c) {
    caf::actor h;
    std::string what;
    try {
      if (c.spec.start)
        h = c.spec.start(self->system());
      else
        what = "no factory";
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "unknown exception";
    }
    if (!h) {
      if (what.empty())
        what = "factory returned an invalid handle";
      return make_error(supervision_errc::child_start_failed,
                        caf::make_message(c.spec.name, std::move(what)));
    }
    c.handle = std::move(h);
    self->monitor(c.handle);
    sync_live();
    return caf::none;
  }

  // Restart after an exit: a failed start counts as another exit of the child.
  void restart_child(child_entry& c, const caf::error& reason, const std::string& cause) {
    if (auto err = spawn_child(c)) {
      auto id = c.id;
      pending.push_back([this, id, err] { handle_exit(id, err); });
      return;
    }
    ++c.restarts;
    emit(child_restarted{cfg.name, c.spec.name, reason, cause, c.restarts});
  }

  // -- stopping ------------------------------------------------------------------

  void arm_timer(std::chrono::milliseconds d) {
    op->token = next_token++;
    self->delayed_send(self, d, stop_timer_atom::value, op->token);
  }

  void run_stop(std::vector<std::uint64_t> ids, std::function<void()> done) {
    op.emplace();
    op->queue.assign(ids.begin(), ids.end());
    op->done = std::move(done);
    stop_next();
  }

  void stop_next() {
    while (!op->queue.empty()) {
      auto id = op->queue.front();
      op->queue.pop_front();
      auto* c = find(id);
      if (c == nullptr || !c->handle)
        continue; // already gone
      op->current = id;
      if (c->spec.shutdown_timeout.count() <= 0) {
        op->killed = true;
        self->send_exit(c->handle, caf::exit_reason::kill);
        arm_timer(cfg.kill_grace);
      } else {
        op->killed = false;
        self->send_exit(c->handle, caf::exit_reason::user_shutdown);
        arm_timer(c->spec.shutdown_timeout);
      }
      return;
    }
    auto done = std::move(op->done);
    op.reset();
    if (done)
      done();
    drain();
  }

  void on_stop_timer(std::uint64_t token) {
    if (!op || op->token != token || op->current == 0)
      return; // stale
    auto* c = find(op->current);
    if (c != nullptr && c->handle) {
      if (!op->killed) {
        op->killed = true;
        self->send_exit(c->handle, caf::exit_reason::kill);
        arm_timer(cfg.kill_grace);
        return;
      }
      // Killed and still not down: blocked outside its mailbox. Forget it
      // (its late down_msg matches no child) and go on.
      self->demonitor(c->handle);
      c->handle = nullptr;
      sync_live();
    }
    op->current = 0;
    stop_next();
  }

  // Running children (optionally only those after `from`) in reverse start order.
  std::vector<std::uint64_t> running_reversed(std::optional<std::uint64_t> after = {}) {
    std::vector<std::uint64_t> ids;
    bool take = !after;
    for (auto& c : children) {
      if (take && c.handle)
        ids.push_back(c.id);
      if (after && c.id == *after)
        take = true;
    }
    std::reverse(ids.begin(), ids.end());
    return ids;
  }

  void drain() {
    while (!op && !pending.empty()) {
      auto f = std::move(pending.front());
      pending.pop_front();
      f();
    }
  }

  // -- exits -----------------------------------------------------------------------

  void on_down(caf::down_msg& dm) {
    auto* c = find(dm.source);
    if (c == nullptr)
      return;
    auto id = c->id;
    c->handle = nullptr;
    sync_live();
    if (op && op->current == id) {
      op->current = 0;
      stop_next();
      return;
    }
    if (op && std::find(op->queue.begin(), op->queue.end(), id) != op->queue.end())
      return; // went down while waiting to be stopped
    pending.push_back([this, id, reason = std::move(dm.reason)] { handle_exit(id, reason); });
    drain();
  }

  // A child ended without being asked to (or failed to restart).
  void handle_exit(std::uint64_t id, const caf::error& reason) {
    auto* c = find(id);
    if (c == nullptr || c->handle)
      return; // removed, or restarted already
    bool restart = c->spec.restart == restart_policy::permanent
                   || (c->spec.restart == restart_policy::transient && !is_normal_exit(reason));
    if (terminating)
      restart = false;
    emit(child_exited{cfg.name, c->spec.name, reason, restart});
    if (!restart) {
      if (c->spec.restart == restart_policy::temporary)
        remove(id);
      return;
    }
    if (!intensity.record(clock::now())) {
      give_up(c->spec.name, static_cast<std::uint32_t>(intensity.count(clock::now())));
      return;
    }
    auto failed = c->spec.name;
    switch (cfg.strategy) {
      case restart_strategy::one_for_one:
        restart_child(*c, reason, failed);
        return;
      case restart_strategy::one_for_all:
      case restart_strategy::rest_for_one: {
        auto group = cfg.strategy == restart_strategy::one_for_all
                         ? running_reversed()
                         : running_reversed(id);
        run_stop(group, [this, id, group, reason, failed] {
          if (terminating)
            return;
          // Restart in start order: the failed child and the stopped ones
          // (temporary children that were stopped are dropped).
          std::vector<std::uint64_t> ids;
          for (auto& ch : children) {
            bool in_group = std::find(group.begin(), group.end(), ch.id) != group.end();
            if (ch.id == id || in_group)
              ids.push_back(ch.id);
          }
          for (auto cid : ids) {
            auto* ch = find(cid);
            if (ch == nullptr || ch->handle)
              continue;
            if (cid != id && ch->spec.restart == restart_policy::temporary) {
              remove(cid);
              continue;
            }
            restart_child(*ch, reason, failed);
          }
        });
        return;
      }
    }
  }

  void give_up(const std::string& child, std::uint32_t count) {
    terminating = true;
    final_reason = make_error(
        supervision_errc::restart_intensity_exceeded,
        caf::make_message(child, count,
                          static_cast<std::int64_t>(cfg.restart_period.count())));
    run_stop(running_reversed(), [this] { finish(); });
  }

  void shutdown(caf::error reason) {
    if (shutdown_started)
      return;
    shutdown_started = true;
    if (terminating && op)
      return; // already giving up: that stop ends in finish()
    terminating = true;
    final_reason = std::move(reason);
    // A running stop (group restart, stop_child) is superseded by stopping
    // everything; its continuation runs in finish() and sees `terminating`.
    if (op && op->done)
      pending.push_front(std::move(op->done));
    op.reset();
    run_stop(running_reversed(), [this] { finish(); });
  }

  void finish() {
    // Queued work sees `terminating` and answers without starting anything.
    auto rest = std::move(pending);
    pending.clear();
    for (auto& f : rest)
      f();
    bool gave_up = final_reason && final_reason.category() == supervision_category;
    for (auto& rp : shutdown_promises) {
      if (gave_up)
        rp.deliver(final_reason);
      else
        rp.deliver(caf::ok_atom::value);
    }
    shutdown_promises.clear();
    live->clear();
    self->quit(final_reason);
  }

  // -- initial start -------------------------------------------------------------

  void start_all() {
    for (auto& c : children) {
      if (auto err = spawn_child(c)) {
        terminating = true;
        shutdown_started = true;
        final_reason = std::move(err);
        run_stop(running_reversed(), [this] { finish(); });
        return;
      }
    }
  }
};

using supervisor_impl = caf::stateful_actor<supervisor_state>;

caf::behavior supervisor_fun(supervisor_impl* self, supervisor_config cfg) {
  auto& st = self->state;
  for (auto& spec : cfg.children)
    st.children.push_back(child_entry{st.next_id++, std::move(spec), caf::actor{}, 0});
  cfg.children.clear();
  st.intensity = restart_intensity{cfg.max_restarts, cfg.restart_period};
  st.cfg = std::move(cfg);
  // If the supervisor dies without an orderly stop, its children die too.
  self->attach_functor([live = st.live](const caf::error&) {
    for (auto& h : *live)
      caf::anon_send_exit(h, caf::exit_reason::kill);
  });
  self->set_down_handler([self](caf::down_msg& dm) { self->state.on_down(dm); });
  self->set_exit_handler([self](caf::exit_msg& em) {
    if (em.reason == caf::exit_reason::normal || !em.reason)
      return; // CAF's default: a normal exit of a linked actor is not fatal
    self->state.shutdown(std::move(em.reason));
  });
  st.start_all();
  return {
      [self](which_children_atom) {
        std::vector<child_info> out;
        for (auto& c : self->state.children)
          out.push_back(child_info{c.spec.name, c.handle, c.restarts, c.spec.restart,
                                   static_cast<bool>(c.handle)});
        return out;
      },
      [self](start_child_atom, child_spec& spec) -> caf::result<caf::actor> {
        auto& s = self->state;
        if (s.terminating)
          return make_error(supervision_errc::shutting_down);
        if (s.find(spec.name) != nullptr)
          return make_error(supervision_errc::duplicate_child, caf::make_message(spec.name));
        s.children.push_back(child_entry{s.next_id++, std::move(spec), caf::actor{}, 0});
        auto& c = s.children.back();
        if (auto err = s.spawn_child(c)) {
          s.children.pop_back();
          return err;
        }
        return c.handle;
      },
      [self](stop_child_atom, std::string& child) -> caf::result<caf::ok_atom> {
        auto& s = self->state;
        auto* c = s.find(child);
        if (c == nullptr)
          return make_error(supervision_errc::unknown_child, caf::make_message(child));
        auto rp = self->make_response_promise();
        auto id = c->id;
        s.pending.push_back([self, id, rp]() mutable {
          auto& sst = self->state;
          if (sst.terminating) { // the shutdown stops it anyway
            rp.deliver(caf::ok_atom::value);
            return;
          }
          sst.run_stop({id}, [self, id, rp]() mutable {
            self->state.remove(id);
            rp.deliver(caf::ok_atom::value);
          });
        });
        s.drain();
        return caf::delegated<caf::ok_atom>{};
      },
      [self](shutdown_atom) -> caf::result<caf::ok_atom> {
        auto& s = self->state;
        s.shutdown_promises.push_back(self->make_response_promise());
        s.shutdown(caf::exit_reason::normal);
        return caf::delegated<caf::ok_atom>{};
      },
      [self](stop_timer_atom, std::uint64_t token) { self->state.on_stop_timer(token); },
  };
}

} // namespace

supervisor_actor spawn_supervisor(caf::actor_system& sys, supervisor_config cfg) {
  return caf::actor_cast<supervisor_actor>(sys.spawn(supervisor_fun, std::move(cfg)));
}

child_spec supervisor_child(supervisor_config cfg, restart_policy restart) {
  std::chrono::milliseconds budget{1000};
  for (auto& c : cfg.children)
    budget += std::max(c.shutdown_timeout, std::chrono::milliseconds{0}) + cfg.kill_grace;
  child_spec spec;
  spec.name = cfg.name;
  spec.restart = restart;
  spec.shutdown_timeout = budget;
  spec.start = [cfg = std::move(cfg)](caf::actor_system& sys) {
    return caf::actor_cast<caf::actor>(spawn_supervisor(sys, cfg));
  };
  return spec;
}

} // namespace dseek::actors
