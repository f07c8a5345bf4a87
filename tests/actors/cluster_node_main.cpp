// dseek_cluster_test_node: one process of a cluster membership test. Runs the
// coordinator or a member (node agent) on loopback and writes every
// membership event it sees as a JSON line to --events:
//
//   dseek_cluster_test_node --role coordinator --port 0 --events c.jsonl
//   dseek_cluster_test_node --role member --port P --node-id 1 --events n1.jsonl
//   dseek_cluster_test_node --role hostile --port P --node-id 1 --events h.jsonl
//
// The hostile role is a stranger that reached the coordinator's port without joining:
// it asks for the member table, restarts node --node-id, gives an address for rank 0,
// and floods hellos, and writes one "probe" event {name, outcome} for each (outcome
// "refused: ..." or "answered: ...").
//
// Options: --host H (127.0.0.1), --secret S (else DSEEK_CLUSTER_SECRET),
// --run-for-seconds N (30), --heartbeat-interval-ms, --heartbeat-timeout-ms,
// --join-retries, --rendezvous-at-world N (a member asks its agent for the rendezvous of
// the first epoch of N members, as its worker would, and writes "rendezvous" {outcome,
// took_ms}). Every line has "t_ms" (wall clock, ms since the Unix
// epoch: the test compares it with when it killed or stopped a process),
// "event" and "self" (the node id, -1 for the coordinator). Events:
//   listening      {port}                        (coordinator, once published)
//   node_joined    {node_id, epoch, rejoined}
//   node_lost      {lost_node, reason, detection_ms, since_heartbeat_ms, epoch}
//   epoch_started  {epoch, world_size, members: "id,id,..." by rank}
//   join_refused   {node_id, reason}
//   agent          {kind: join_failed|coordinator_lost|evicted, reason}
//   exit           {code}
// Exit codes: 0 after --run-for-seconds, 1 bad usage or setup, 2 join
// refused, 3 could not join, 4 coordinator lost.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/coordinator.hpp"
#include "actors/cluster/node_agent.hpp"
#include "actors/message_types.hpp"

using namespace dseek::actors;

namespace {

struct options {
  std::string role;
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::int64_t node_id = -1;
  std::string secret;
  int run_for_seconds = 30;
  int heartbeat_interval_ms = 250;
  int heartbeat_timeout_ms = 1500;
  int join_retries = 20;
  int rendezvous_at_world = 0;  // a member asks its agent for a rendezvous then (0: never)
  std::string events;
};

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

struct event_log {
  std::FILE* f = nullptr;
  std::int64_t self = -1;
  caf::actor agent;             // a member's node agent (--rendezvous-at-world)
  int rendezvous_at_world = 0;
  bool asked = false;

  void write(const std::string& event, const std::string& fields) {
    auto t = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
    std::string line = "{\"t_ms\":" + std::to_string(t) + ",\"event\":\"" + event
                       + "\",\"self\":" + std::to_string(self);
    if (!fields.empty())
      line += "," + fields;
    line += "}\n";
    if (f != nullptr) {
      std::fputs(line.c_str(), f);
      std::fflush(f);
    }
  }
};

std::string str(const char* k, const std::string& v) {
  return std::string{"\""} + k + "\":\"" + json_escape(v) + "\"";
}
template <class T>
std::string num(const char* k, T v) {
  return std::string{"\""} + k + "\":" + std::to_string(v);
}

using ask_atom = caf::atom_constant<caf::atom("tstask")>;

caf::behavior listener(caf::event_based_actor* self, std::shared_ptr<event_log> log) {
  return {
      [log](const node_joined& e) {
        log->write("node_joined", num("node_id", e.node_id) + "," + num("epoch", e.epoch) + ","
                                      + "\"rejoined\":" + (e.rejoined ? "true" : "false"));
      },
      [log](const node_lost& e) {
        log->write("node_lost", num("lost_node", e.lost_node) + "," + str("reason", e.reason)
                                    + "," + num("detection_ms", e.detection_ms) + ","
                                    + num("since_heartbeat_ms", e.since_heartbeat_ms) + ","
                                    + num("epoch", e.epoch));
      },
      [log, self](const epoch_started& e) {
        std::string ids;
        for (auto& m : e.members)
        {
        if (!ids.empty())
          ids += ',';
        ids += std::to_string(m.node_id);
      }
        log->write("epoch_started", num("epoch", e.epoch) + ","
                                        + num("world_size", e.world_size) + ","
                                        + str("members", ids));
        // --rendezvous-at-world: this member's rank asks for the epoch's rendezvous, as a
        // worker does, through its agent; the others do not, so it waits for an answer.
        // (Asked a moment later: the agent may tell this listener of the epoch before it
        // counts itself a member.)
        if (log->agent && !log->asked && log->rendezvous_at_world > 0 &&
            e.world_size >= log->rendezvous_at_world) {
          log->asked = true;
          std::int32_t rank = 0;
          for (auto& m : e.members)
            if (m.node_id == log->self) rank = m.rank;
          self->delayed_send(self, std::chrono::milliseconds(200), ask_atom::value, e.epoch, rank);
        }
      },
      [log, self](ask_atom, std::uint64_t epoch, std::int32_t rank) {
        const auto asked_at = std::chrono::steady_clock::now();
        const auto took_ms = [asked_at] {
          return std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - asked_at).count();
        };
        self->request(log->agent, std::chrono::seconds(60), rendezvous_atom::value, epoch, rank,
                      std::string("address"))
            .then(
                [log, took_ms](rendezvous_result&) {
                  log->write("rendezvous", str("outcome", "answered") + "," + num("took_ms", took_ms()));
                },
                [log, took_ms, self](caf::error& error) {
                  log->write("rendezvous", str("outcome", "failed: " + self->system().render(error)) +
                                               "," + num("took_ms", took_ms()));
                });
      },
      [log](const join_refused& e) {
        log->write("join_refused", num("node_id", e.node_id) + "," + str("reason", e.reason));
      },
      [log](const agent_event& e) {
        log->write("agent", str("kind", e.kind) + "," + str("reason", e.reason));
      },
      // A flush: everything enqueued before it has been written.
      [](caf::ok_atom) { return caf::ok_atom::value; },
  };
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--role") o.role = value();
    else if (a == "--host") o.host = value();
    else if (a == "--port") o.port = static_cast<std::uint16_t>(std::stoi(value()));
    else if (a == "--node-id") o.node_id = std::stoll(value());
    else if (a == "--secret") o.secret = value();
    else if (a == "--run-for-seconds") o.run_for_seconds = std::stoi(value());
    else if (a == "--heartbeat-interval-ms") o.heartbeat_interval_ms = std::stoi(value());
    else if (a == "--heartbeat-timeout-ms") o.heartbeat_timeout_ms = std::stoi(value());
    else if (a == "--join-retries") o.join_retries = std::stoi(value());
    else if (a == "--rendezvous-at-world") o.rendezvous_at_world = std::stoi(value());
    else if (a == "--events") o.events = value();
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return false;
    }
  }
  if (o.role != "coordinator" && o.role != "member" && o.role != "hostile") {
    std::fprintf(stderr, "--role must be coordinator, member or hostile\n");
    return false;
  }
  if (o.role != "coordinator" && (o.node_id < 0 || o.port == 0)) {
    std::fprintf(stderr, "a member needs --node-id and --port (the coordinator's)\n");
    return false;
  }
  return true;
}

int exit_code_of(const caf::error& reason) {
  if (!reason || reason == caf::exit_reason::normal)
    return 0;
  if (reason.category() == cluster_category) {
    switch (static_cast<cluster_errc>(reason.code())) {
      case cluster_errc::auth_failed: return 2;
      case cluster_errc::connect_failed: return 3;
      case cluster_errc::coordinator_lost: return 4;
      default: break;
    }
  }
  return 1;
}

// The hostile role's probes (see the header); every request is bounded.
void run_hostile(caf::actor_system& sys, const options& o, event_log& log) {
  auto coord = caf::io::remote_actor(sys, o.host, o.port);
  if (!coord) {
    log.write("probe", str("name", "connect") + "," + str("outcome", "failed: " + sys.render(coord.error())));
    return;
  }
  caf::scoped_actor self{sys};
  auto report = [&](const char* name, const std::string& outcome) {
    log.write("probe", str("name", name) + "," + str("outcome", outcome));
  };
  auto refused = [&](caf::error& err) { return "refused: " + sys.render(err); };
  std::string outcome;
  self->request(*coord, std::chrono::seconds(3), members_atom::value)
      .receive([&](epoch_started& e) { outcome = "answered: world " + std::to_string(e.world_size); },
               [&](caf::error& err) { outcome = refused(err); });
  report("members", outcome);
  self->request(*coord, std::chrono::seconds(3), restarted_atom::value, o.node_id, std::string("hostile"))
      .receive([&](epoch_started& e) { outcome = "answered: epoch " + std::to_string(e.epoch); },
               [&](caf::error& err) { outcome = refused(err); });
  report("restarted", outcome);
  // Epoch 1 and 2 are what a small job has early on; any answer but a refusal is a fail.
  for (std::uint64_t epoch : {1, 2, 3}) {
    self->request(*coord, std::chrono::seconds(1), rendezvous_atom::value, epoch, std::int32_t{0},
                  std::string("hostile-address"))
        .receive([&](rendezvous_result&) { outcome = "answered: a rank table"; },
                 [&](caf::error& err) {
                   outcome = err == caf::sec::request_timeout ? "answered: accepted, waiting"
                                                              : refused(err);
                 });
    report("rendezvous", outcome);
  }
  // A join with a real challenge and a wrong MAC (node 7; the coordinator's proof is not
  // checked: a stranger does not care).
  join_challenge issued;
  self->request(*coord, std::chrono::seconds(3), hello_atom::value, std::int64_t{7}, make_nonce())
      .receive([&](join_challenge& c) { issued = c; }, [&](caf::error&) {});
  join_proof forged{7, "127.0.0.1", issued.nonce, std::string(64, '0'), caf::actor_cast<caf::actor>(self)};
  self->request(*coord, std::chrono::seconds(3), join_atom::value, forged)
      .receive([&](epoch_started& e) { outcome = "answered: epoch " + std::to_string(e.epoch); },
               [&](caf::error& err) { outcome = refused(err); });
  report("join_wrong_mac", outcome);
  int challenges = 0;
  std::string last;
  for (int i = 0; i < 40; ++i) {
    self->request(*coord, std::chrono::seconds(3), hello_atom::value, std::int64_t{1000 + i},
                  make_nonce())
        .receive([&](join_challenge&) { ++challenges; }, [&](caf::error& err) { last = refused(err); });
  }
  report("hello_flood", "answered " + std::to_string(challenges) + " of 40; last " + last);
}

} // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o))
    return 1;
  auto log = std::make_shared<event_log>();
  log->self = o.role == "coordinator" ? -1 : o.node_id;
  if (!o.events.empty()) {
    log->f = std::fopen(o.events.c_str(), "a");
    if (log->f == nullptr) {
      std::fprintf(stderr, "cannot open %s\n", o.events.c_str());
      return 1;
    }
  }
  int code = 0;
  {
    caf::actor_system_config cfg;
    register_message_types(cfg);
    cfg.load<caf::io::middleman>();
    caf::actor_system sys{cfg};
    auto events = sys.spawn(listener, log);

    ClusterSettings settings;
    settings.secret = o.secret;
    settings.heartbeat_interval = std::chrono::milliseconds(o.heartbeat_interval_ms);
    settings.heartbeat_timeout = std::chrono::milliseconds(o.heartbeat_timeout_ms);
    settings.join_retries = static_cast<std::uint32_t>(o.join_retries);

    caf::actor main_actor;
    if (o.role == "hostile") {
      run_hostile(sys, o, *log);
    } else if (o.role == "coordinator") {
      coordinator_config cc;
      cc.settings = settings;
      cc.listener = events;
      auto coord = spawn_coordinator(sys, cc);
      if (!coord) {
        std::fprintf(stderr, "coordinator: %s\n", sys.render(coord.error()).c_str());
        code = 1;
      } else {
        main_actor = *coord;
        auto port = publish_coordinator(sys, main_actor, o.port, o.host);
        if (!port) {
          std::fprintf(stderr, "cannot publish the coordinator on %s:%u: %s\n",
                       o.host.c_str(), unsigned{o.port}, sys.render(port.error()).c_str());
          code = 1;
        } else {
          std::fprintf(stderr, "[dseek coordinator] listening on %s:%u\n", o.host.c_str(),
                       unsigned{*port});
          log->write("listening", num("port", *port));
        }
      }
    } else {
      node_agent_config ac;
      ac.node_id = o.node_id;
      ac.coordinator = o.host + ":" + std::to_string(o.port);
      ac.settings = settings;
      ac.listener = events;
      auto agent = spawn_node_agent(sys, ac);
      if (!agent) {
        std::fprintf(stderr, "node agent: %s\n", sys.render(agent.error()).c_str());
        code = 1;
      } else {
        main_actor = *agent;
        log->agent = *agent;
        log->rendezvous_at_world = o.rendezvous_at_world;
      }
    }
    if (main_actor && code == 0) {
      caf::scoped_actor self{sys};
      self->monitor(main_actor);
      self->receive(
          [&](caf::down_msg& dm) {
            code = exit_code_of(dm.reason);
            std::fprintf(stderr, "%s ended: %s\n", o.role.c_str(),
                         sys.render(dm.reason).c_str());
          },
          caf::after(std::chrono::seconds(o.run_for_seconds)) >> [&] {});
    }
    if (main_actor)
      caf::anon_send_exit(main_actor, caf::exit_reason::user_shutdown);
    {
      caf::scoped_actor self{sys};
      self->request(events, std::chrono::seconds(2), caf::ok_atom::value)
          .receive([](caf::ok_atom) {}, [](caf::error&) {});
    }
    caf::anon_send_exit(events, caf::exit_reason::user_shutdown);
  }
  log->write("exit", num("code", code));
  if (log->f != nullptr)
    std::fclose(log->f);
  return code;
}
