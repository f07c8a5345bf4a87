// Test children and a fixture for the supervisor tests: an actor system with
// dseek's message types, a scoped actor that is the supervisor's listener,
// and children that crash, throw, hang (trap exits) or end normally on
// command. Every wait is bounded.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include "actors/message_types.hpp"
#include "actors/supervision/supervisor.hpp"

namespace dseek::test {

using namespace dseek::actors;
using namespace std::chrono_literals;

using crash_atom = caf::atom_constant<caf::atom("crash")>;
using throw_atom = caf::atom_constant<caf::atom("throw")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;

constexpr auto wait_limit = std::chrono::seconds(5);

// What the children did, in order: "start:a", "stop:a", ...
struct probe {
  std::mutex m;
  std::vector<std::string> log;
  std::map<std::string, caf::error> last_exit;

  void add(std::string s) {
    std::lock_guard<std::mutex> g{m};
    log.push_back(std::move(s));
  }
  void set_exit(const std::string& name, const caf::error& reason) {
    std::lock_guard<std::mutex> g{m};
    last_exit[name] = reason;
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> g{m};
    return log;
  }
  void clear() {
    std::lock_guard<std::mutex> g{m};
    log.clear();
    last_exit.clear();
  }
  std::optional<caf::error> exit_of(const std::string& name) {
    std::lock_guard<std::mutex> g{m};
    auto i = last_exit.find(name);
    if (i == last_exit.end())
      return std::nullopt;
    return i->second;
  }
};

// Logs "stop:<name>" before it quits (so before its down_msg leaves), or
// from its cleanup when killed.
inline void log_stops(caf::event_based_actor* self, const std::shared_ptr<probe>& p,
                      const std::string& name, const std::shared_ptr<bool>& logged) {
  self->attach_functor([p, name, logged](const caf::error& reason) {
    if (!*logged)
      p->add("stop:" + name);
    p->set_exit(name, reason);
  });
}

inline caf::behavior worker(caf::event_based_actor* self, std::shared_ptr<probe> p,
                            std::string name) {
  auto logged = std::make_shared<bool>(false);
  log_stops(self, p, name, logged);
  auto stop = [self, p, name, logged](caf::error reason) {
    *logged = true;
    p->add("stop:" + name);
    self->quit(std::move(reason));
  };
  self->set_exit_handler([stop](caf::exit_msg& em) {
    if (em.reason && em.reason != caf::exit_reason::normal)
      stop(std::move(em.reason));
  });
  return {
      [stop](crash_atom) { stop(caf::make_error(caf::sec::runtime_error)); },
      [p, name, logged](throw_atom) {
        *logged = true;
        p->add("stop:" + name);
        throw std::runtime_error("thrown on purpose");
      },
      [stop](finish_atom) { stop(caf::error{}); },
  };
}

// Ignores exit messages (all but kill): a child that will not stop.
inline caf::behavior hung_worker(caf::event_based_actor* self, std::shared_ptr<probe> p,
                                 std::string name) {
  log_stops(self, p, name, std::make_shared<bool>(false));
  self->set_exit_handler([](caf::exit_msg&) {});
  return {[self](finish_atom) { self->quit(); }};
}

inline child_spec worker_spec(std::shared_ptr<probe> p, std::string name,
                              restart_policy policy = restart_policy::permanent,
                              std::chrono::milliseconds timeout = 2000ms) {
  child_spec spec;
  spec.name = name;
  spec.restart = policy;
  spec.shutdown_timeout = timeout;
  // "start:" is logged by the factory: it runs in the supervisor, in start order.
  spec.start = [p, name](caf::actor_system& sys) {
    p->add("start:" + name);
    return sys.spawn(worker, p, name);
  };
  return spec;
}

inline child_spec hung_spec(std::shared_ptr<probe> p, std::string name,
                            std::chrono::milliseconds timeout) {
  child_spec spec;
  spec.name = name;
  spec.shutdown_timeout = timeout;
  spec.start = [p, name](caf::actor_system& sys) {
    p->add("start:" + name);
    return sys.spawn(hung_worker, p, name);
  };
  return spec;
}

inline caf::actor_system_config& test_config(caf::actor_system_config& cfg) {
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", 4);
  return cfg;
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{test_config(cfg)};
  caf::scoped_actor self{sys};
  std::shared_ptr<probe> log = std::make_shared<probe>();
  std::vector<caf::actor> to_kill; // supervisors still alive at the end

  ~fixture() {
    for (auto& s : to_kill)
      self->send_exit(s, caf::exit_reason::kill);
  }

  supervisor_actor start(supervisor_config c) {
    c.listener = caf::actor_cast<caf::actor>(self);
    auto sup = spawn_supervisor(sys, std::move(c));
    to_kill.push_back(caf::actor_cast<caf::actor>(sup));
    return sup;
  }

  std::vector<child_info> children(const supervisor_actor& sup) {
    std::vector<child_info> out;
    bool got = false;
    self->request(sup, wait_limit, which_children_atom::value)
        .receive([&](std::vector<child_info>& v) { out = std::move(v); got = true; },
                 [&](caf::error& e) { FAIL("which_children: " << sys.render(e)); });
    REQUIRE(got);
    return out;
  }

  caf::actor child(const supervisor_actor& sup, const std::string& name) {
    for (auto& c : children(sup))
      if (c.name == name)
        return c.handle;
    FAIL("no child " << name);
    return {};
  }

  template <class Event>
  Event next() {
    Event out;
    bool got = false;
    self->receive([&](Event& ev) { out = std::move(ev); got = true; },
                  caf::after(wait_limit) >> [&] {});
    if (!got)
      FAIL("no event within " << wait_limit.count() << " s");
    return out;
  }

  // Down messages of other actors seen while waiting for one.
  std::vector<caf::down_msg> other_downs;

  caf::down_msg wait_down(const caf::actor& who) {
    for (auto i = other_downs.begin(); i != other_downs.end(); ++i) {
      if (i->source == who.address()) {
        auto out = std::move(*i);
        other_downs.erase(i);
        return out;
      }
    }
    caf::down_msg out;
    bool got = false;
    auto deadline = std::chrono::steady_clock::now() + wait_limit;
    while (!got && std::chrono::steady_clock::now() < deadline) {
      self->receive(
          [&](caf::down_msg& dm) {
            if (dm.source == who.address()) {
              out = std::move(dm);
              got = true;
            } else {
              other_downs.push_back(std::move(dm));
            }
          },
          caf::after(wait_limit) >> [&] {});
    }
    if (!got)
      FAIL("no down_msg within " << wait_limit.count() << " s");
    return out;
  }

  // The exit reason a child recorded in its cleanup (waits for it).
  caf::error exit_of(const std::string& name) {
    auto deadline = std::chrono::steady_clock::now() + wait_limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto r = log->exit_of(name))
        return *r;
      std::this_thread::sleep_for(2ms);
    }
    FAIL("child " << name << " never exited");
    return {};
  }

  // Waits until the log holds `n` entries (children log asynchronously).
  std::vector<std::string> wait_log(std::size_t n) {
    auto deadline = std::chrono::steady_clock::now() + wait_limit;
    while (log->events().size() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(2ms);
    return log->events();
  }
};

inline std::vector<std::string> strs(std::initializer_list<const char*> xs) {
  return {xs.begin(), xs.end()};
}

} // namespace dseek::test
