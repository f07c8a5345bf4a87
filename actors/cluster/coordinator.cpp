#include "actors/cluster/coordinator.hpp"
#include "actors/cluster/clock_offset.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/publish.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/cluster/handshake_gate.hpp"
#include "runtime/metrics/trace_spans.hpp"

namespace dseek::actors {
namespace {

using clock = std::chrono::steady_clock;
using check_atom = caf::atom_constant<caf::atom("clcheck")>;

constexpr std::size_t max_pending_challenges = 1024;
// Per source (a connected process: CAF's node id): a flood of hellos from one source
// fills its own quota, not the table every real join needs.
constexpr std::size_t max_pending_challenges_per_source = 8;

std::int64_t ms_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

struct member_entry {
  std::int64_t node_id = 0;
  caf::actor agent;
  std::string host;
  std::uint64_t joined_epoch = 0;
  clock::time_point last_heartbeat;
  // The SDC audit evicted it while it hosts this coordinator (retire_atom): it stays a
  // member, with no worker in the plan, until the job ends.
  bool retired = false;
};

struct pending_challenge {
  std::int64_t node_id = 0;
  clock::time_point expires;
  caf::node_id source;  // the process that asked
};

// A join held until the quorum is there (coordinator_config::quorum).
struct held_join {
  member_entry entry;
  caf::typed_response_promise<epoch_started> promise;
  clock::time_point until;
};

// The contributions to the current epoch's rendezvous so far, and who waits for the result.
struct rendezvous_round {
  std::uint64_t epoch = 0;
  std::map<std::int32_t, std::string> payloads;
  std::map<std::int32_t, caf::typed_response_promise<rendezvous_result>> waiting;
};

struct coordinator_state {
  explicit coordinator_state(caf::event_based_actor* s) : self(s) {}

  caf::event_based_actor* self;
  coordinator_config cfg;
  std::string secret;
  std::map<std::int64_t, member_entry> members; // by node id = rank order
  std::map<std::int64_t, held_join> held;        // joins waiting for the quorum
  std::int32_t left_in_order = 0;  // members that finished or were stopped ("left")
  std::set<std::int64_t> ever_joined;
  std::unordered_map<std::string, pending_challenge> challenges;
  std::uint64_t epoch = 0;
  std::uint64_t coordinator_id = 0;  // random per incarnation (epoch_started.coordinator_id)
  rendezvous_round round;
  std::uint64_t refused_requests = 0;  // from senders that are not members (logged sparsely)
  std::chrono::milliseconds check_interval{150};
  clock::time_point last_check = clock::now();

  static inline const char* name = "dseek.coordinator";

  template <class... Ts>
  void log(const char* fmt, Ts... xs) {
    if (cfg.log) log_line("dseek coordinator", fmt, xs...);
  }

  epoch_started snapshot() const {
    epoch_started ev;
    ev.epoch = epoch;
    ev.coordinator_id = coordinator_id;
    // The members that train (a retired one is a member, not part of the world).
    ev.world_size = static_cast<std::int32_t>(std::count_if(
        members.begin(), members.end(), [](const auto& entry) { return !entry.second.retired; }));
    std::int32_t rank = 0;
    for (auto& [id, m] : members) {
      if (m.retired) continue;
      for (std::int32_t local = 0; local < cfg.ranks_per_node; ++local)
        ev.plan.push_back(worker_assignment{id, "worker", rank * cfg.ranks_per_node + local});
      ev.members.push_back(member_info{id, rank++, m.host, m.joined_epoch});
    }
    // Retired members last, without workers.
    for (auto& [id, m] : members) {
      if (!m.retired) continue;
      ev.plan.push_back(worker_assignment{id, "retired", -1});
      ev.members.push_back(member_info{id, rank++, m.host, m.joined_epoch});
    }
    return ev;
  }

  // The process the current message came from (none for an anonymous send).
  caf::node_id sender_node() const {
    const auto& sender = self->current_sender();
    return sender ? sender->node() : caf::node_id{};
  }

  // Whether the current message comes from member `m`'s process (its agent, or a worker
  // next to it), or from this process. The join bound the member to its agent, and the
  // agent to the connection (CAF node) it joined over: a stranger that reached the port,
  // or a node that was not admitted, is not one of them.
  bool from_member(const member_entry& m) const {
    const auto sender = self->current_sender();
    if (!sender) return false;
    return sender->node() == self->node() || (m.agent && sender->node() == m.agent.node());
  }

  bool from_any_member() const {
    const auto sender = self->current_sender();
    if (!sender) return false;
    if (sender->node() == self->node()) return true;
    return std::any_of(members.begin(), members.end(),
                       [&](const auto& entry) { return from_member(entry.second); });
  }

  caf::error refuse_stranger(const char* what) {
    ++refused_requests;
    // (The reply says nothing of the job: not even its epoch.)
    const std::string why = std::string(what) + " from a sender that is not an authenticated "
                            "member of this job: refused";
    if (refused_requests == 1 || refused_requests % 100 == 0)
      log("%s (%llu such requests so far)", why.c_str(),
          static_cast<unsigned long long>(refused_requests));
    return make_error(cluster_errc::not_a_member, caf::make_message(why));
  }

  // The member that holds data-parallel rank `rank` of the current plan, if any.
  const member_entry* member_of_rank(std::int32_t rank) const {
    if (rank < 0 || cfg.ranks_per_node <= 0) return nullptr;
    auto index = rank / cfg.ranks_per_node;
    for (auto& [id, m] : members)
      if (!m.retired && index-- == 0) return &m;
    return nullptr;
  }

  // The data-parallel ranks of the current epoch: every member's workers but a retired one's.
  std::int32_t planned_ranks() const {
    const auto training = std::count_if(members.begin(), members.end(),
                                        [](const auto& entry) { return !entry.second.retired; });
    return static_cast<std::int32_t>(training) * cfg.ranks_per_node;
  }

  // Every epoch change ends the rendezvous of the old epoch: its waiters get
  // stale_epoch and build for the new epoch instead.
  void end_rendezvous(const std::string& why) {
    for (auto& [rank, promise] : round.waiting)
      promise.deliver(make_error(cluster_errc::stale_epoch, caf::make_message(why)));
    round = rendezvous_round{};
  }

  caf::result<rendezvous_result> on_rendezvous(std::uint64_t for_epoch, std::int32_t rank,
                                               std::string& payload) {
    // Strangers learn nothing, not even the current epoch.
    if (!from_any_member())
      return refuse_stranger("rendezvous");
    if (for_epoch != epoch || rank < 0 || rank >= planned_ranks())
      return make_error(cluster_errc::stale_epoch,
                        caf::make_message("rendezvous for epoch " + std::to_string(for_epoch)
                                          + " rank " + std::to_string(rank)
                                          + ", but the current epoch is "
                                          + std::to_string(epoch) + " with "
                                          + std::to_string(planned_ranks()) + " ranks"));
    // Only the member that holds the rank may give its address: anyone else could
    // redirect a rank's data plane.
    if (const member_entry* holder = member_of_rank(rank); holder == nullptr || !from_member(*holder))
      return refuse_stranger(("rendezvous for rank " + std::to_string(rank)).c_str());
    if (round.epoch != epoch)
      round = rendezvous_round{epoch, {}, {}};
    // A rank that asks again (its worker restarted) replaces its contribution.
    if (auto old = round.waiting.find(rank); old != round.waiting.end()) {
      old->second.deliver(make_error(cluster_errc::stale_epoch,
                                     caf::make_message(std::string{"superseded by a new request"})));
      round.waiting.erase(old);
    }
    round.payloads[rank] = std::move(payload);
    auto promise = self->make_response_promise<rendezvous_result>();
    round.waiting.emplace(rank, promise);
    if (round.payloads.size() == static_cast<size_t>(planned_ranks())) {
      rendezvous_result result;
      result.epoch = epoch;
      result.data_key = make_data_key();  // for these ranks' data plane only
      for (auto& [r, p] : round.payloads)
        result.payloads.push_back(std::move(p));
      for (auto& [r, waiter] : round.waiting)
        waiter.deliver(result);
      round = rendezvous_round{};
    }
    return promise;
  }

  caf::result<caf::ok_atom> on_leave(std::int64_t node_id, const std::string& why) {
    auto i = members.find(node_id);
    auto sender = caf::actor_cast<caf::actor>(self->current_sender());
    if (i == members.end() || i->second.agent != sender)
      return caf::ok_atom::value; // already gone
    lose(node_id, why.empty() ? std::string{"left"} : "left: " + why, 0);
    return caf::ok_atom::value;
  }

  // A member's workers restarted (a crash in its worker group): their data plane is
  // gone, and so is every peer's collective with them. A new epoch with the same
  // members, announced as the loss of that node's workers, brings all ranks together
  // again.
  caf::result<epoch_started> on_worker_restart(std::int64_t node_id, const std::string& why) {
    return replan(node_id, 0, -1, "worker restarted: " + why, "restart");
  }

  // A member's data plane could not connect in `for_epoch`: if it is still the current
  // epoch, a new one (the same members, or without `lost_node`); else nothing changes:
  // another rank asked first, or the membership moved on.
  caf::result<epoch_started> on_replan(std::int64_t node_id, std::uint64_t for_epoch,
                                       std::int64_t lost_node, const std::string& why) {
    if (lost_node >= 0)
      return replan(node_id, for_epoch, lost_node,
                    "unreachable on the data plane from node " + std::to_string(node_id) +
                        ": " + why,
                    "replan");
    return replan(node_id, for_epoch,
                  -1, "data plane failed on node " + std::to_string(node_id) + ": " + why,
                  "replan");
  }

  // A new epoch asked for by member `node_id` (its own process only): with the same
  // members, announced as node_lost of `node_id` with `reason` so the peers abort their
  // collectives, or without `lost_node` (>= 0). `for_epoch` (0: any) must be the current
  // epoch, else the current epoch is returned unchanged.
  caf::result<epoch_started> replan(std::int64_t node_id, std::uint64_t for_epoch,
                                    std::int64_t lost_node, const std::string& reason,
                                    const char* what) {
    // (Delegated by the node's agent: the sender is the node's worker, not its agent.)
    auto member = members.find(node_id);
    if (member == members.end())
      return make_error(cluster_errc::not_a_member,
                        caf::make_message("node " + std::to_string(node_id) +
                                          " is not a member of epoch " + std::to_string(epoch)));
    // Each of these starts an epoch: only node `node_id` itself may say so.
    if (!from_member(member->second))
      return refuse_stranger((std::string(what) + " of node " + std::to_string(node_id)).c_str());
    if (for_epoch != 0 && for_epoch != epoch) return snapshot();
    if (lost_node >= 0) {
      if (lost_node == node_id || members.count(lost_node) == 0) return snapshot();
      lose(lost_node, reason, 0);
      return snapshot();
    }
    return next_epoch(node_id, reason, "node %lld: %s; epoch %llu");
  }

  // Starts the next epoch because of member `node_id` (node_lost of it with `reason`
  // first, so that its peers abort their collectives), logged by `log_format` (node,
  // reason, epoch). Returns the new epoch, also sent to everyone.
  epoch_started next_epoch(std::int64_t node_id, std::string reason, const char* log_format) {
    node_lost ev;
    ev.lost_node = node_id;
    ev.reason = std::move(reason);
    ev.epoch = ++epoch;
    end_rendezvous("epoch " + std::to_string(epoch) + " started: node " +
                   std::to_string(node_id) + " " + ev.reason);
    log(log_format, static_cast<long long>(node_id), ev.reason.c_str(),
        static_cast<unsigned long long>(epoch));
    broadcast(ev);
    auto now = snapshot();
    broadcast(now);
    return now;
  }

  // The SDC audit evicted member `node_id`, which hosts this coordinator (its own process
  // only): with no coordinator failover, it cannot leave without ending the job, so it
  // stays a member that no longer trains, and a new epoch without its workers begins
  // (node_lost "evicted by the SDC audit: <why>" first). Again for a retired member:
  // the current epoch.
  caf::result<epoch_started> retire(std::int64_t node_id, const std::string& why) {
    auto member = members.find(node_id);
    if (member == members.end())
      return make_error(cluster_errc::not_a_member,
                        caf::make_message("node " + std::to_string(node_id) + " is not a member"));
    if (!from_member(member->second) || sender_node() != self->node())
      return refuse_stranger(("retirement of node " + std::to_string(node_id)).c_str());
    if (member->second.retired) return snapshot();
    member->second.retired = true;
    return next_epoch(node_id, "evicted by the SDC audit: " + why,
                      "node %lld (this coordinator's) no longer trains, %s; epoch %llu");
  }

  template <class Event>
  void broadcast(const Event& ev) {
    for (auto& [id, m] : members)
      self->send(m.agent, ev);
    if (cfg.listener)
      self->send(cfg.listener, ev);
  }

  // Removes a member (no epoch change yet). Returns the event to send.
  node_lost remove(std::int64_t node_id, std::string reason, std::int64_t detection_ms,
                   clock::time_point now) {
    node_lost ev;
    auto i = members.find(node_id);
    if (i == members.end())
      return ev;
    ev.lost_node = node_id;
    ev.reason = std::move(reason);
    ev.detection_ms = detection_ms;
    ev.since_heartbeat_ms = ms_between(i->second.last_heartbeat, now);
    self->demonitor(i->second.agent);
    members.erase(i);
    return ev;
  }

  void lose(std::int64_t node_id, std::string reason, std::int64_t detection_ms) {
    auto now = clock::now();
    auto ev = remove(node_id, std::move(reason), detection_ms, now);
    if (ev.reason == "left") ++left_in_order;
    ev.epoch = ++epoch;
    if (!has_quorum()) {
      // Below the majority (a partition, or too many nodes lost): no epoch here. The
      // members abort their collectives (node_lost) and, when this actor is gone, walk
      // the succession to the majority's coordinator.
      end_rendezvous("the majority is lost");
      const std::string why = "node " + std::to_string(node_id) + " " + ev.reason + ": " +
                              std::to_string(members.size() + left_in_order) +
                              " of the job's nodes are members, a majority is " +
                              std::to_string(cfg.quorum) + ": this coordinator stops";
      log("lost the majority: %s", why.c_str());
      broadcast(ev);
      self->quit(make_error(cluster_errc::no_quorum, caf::make_message(why)));
      return;
    }
    end_rendezvous("epoch " + std::to_string(epoch) + " started: node "
                   + std::to_string(node_id) + " " + ev.reason);
    // An orderly leave (the node finished or was stopped) is no loss.
    if (ev.reason == "left")
      log("node %lld left: epoch %llu, world %zu", static_cast<long long>(node_id),
          static_cast<unsigned long long>(epoch), members.size());
    else
      log("node %lld lost (%s; detected %lld ms after the failure, last heartbeat %lld ms "
          "ago): epoch %llu, world %zu",
          static_cast<long long>(node_id), ev.reason.c_str(),
          static_cast<long long>(ev.detection_ms), static_cast<long long>(ev.since_heartbeat_ms),
          static_cast<unsigned long long>(epoch), members.size());
    broadcast(ev);
    broadcast(snapshot());
  }

  caf::error refuse(std::int64_t node_id, const std::string& host, cluster_errc code,
                    std::string why) {
    log("refused join of node %lld (host %s): %s: %s", static_cast<long long>(node_id),
        host.c_str(), to_string(code).c_str(), why.c_str());
    if (cfg.listener)
      self->send(cfg.listener, join_refused{node_id, "", to_string(code) + ": " + why});
    return make_error(code, caf::make_message(std::move(why)));
  }

  void purge_challenges(clock::time_point now) {
    for (auto i = challenges.begin(); i != challenges.end();) {
      if (i->second.expires <= now)
        i = challenges.erase(i);
      else
        ++i;
    }
  }

  caf::result<join_challenge> on_hello(std::int64_t node_id, const std::string& node_nonce) {
    auto now = clock::now();
    purge_challenges(now);
    const auto source = sender_node();
    const auto from_source = std::count_if(challenges.begin(), challenges.end(), [&](const auto& c) {
      return c.second.source == source;
    });
    if (static_cast<std::size_t>(from_source) >= max_pending_challenges_per_source)
      return make_error(cluster_errc::busy,
                        caf::make_message(std::string{"too many pending joins from this source"}));
    if (challenges.size() >= max_pending_challenges)
      return make_error(cluster_errc::busy, caf::make_message(std::string{"too many pending joins"}));
    if (node_nonce.size() < 32 || node_nonce.size() > 128)
      return make_error(cluster_errc::bad_challenge,
                        caf::make_message(std::string{"hello without the node's nonce"}));
    join_challenge ch;
    try {
      ch.nonce = make_nonce();
      // The coordinator proves the secret too (mutual challenge): a node joins only a
      // coordinator that knows it, not whoever answers at the address.
      ch.coordinator_mac = coordinator_mac(secret, node_nonce, ch.nonce, node_id);
    } catch (const std::exception& e) {
      return make_error(cluster_errc::busy, caf::make_message(std::string{e.what()}));
    }
    challenges[ch.nonce] = pending_challenge{node_id, now + cfg.settings.challenge_lifetime, source};
    return ch;
  }

  // Whether the members (with the ones that finished in order) make the quorum.
  bool has_quorum() const {
    return cfg.quorum <= 0 ||
           static_cast<std::int32_t>(members.size()) + left_in_order >= cfg.quorum;
  }

  std::string quorum_status() const {
    return std::to_string(members.size() + held.size()) + " of the job's nodes ask to be "
           "members, a majority is " + std::to_string(cfg.quorum);
  }

  // Holds the join of `m` until the quorum is there; admits every held join at once
  // (one epoch) when this one completes it.
  caf::result<epoch_started> hold(member_entry m) {
    if (auto old = held.find(m.node_id); old != held.end()) {  // an earlier attempt
      old->second.promise.deliver(make_error(cluster_errc::no_quorum,
                                             caf::make_message(std::string{"superseded"})));
      self->demonitor(old->second.entry.agent);
      held.erase(old);
    }
    self->monitor(m.agent);
    auto promise = self->make_response_promise<epoch_started>();
    const auto id = m.node_id;
    held.emplace(id, held_join{std::move(m), promise, clock::now() + cfg.quorum_hold});
    if (static_cast<std::int32_t>(members.size() + held.size()) + left_in_order < cfg.quorum) {
      log("node %lld waits for a majority: %s", static_cast<long long>(id),
          quorum_status().c_str());
      return promise;
    }
    ++epoch;
    end_rendezvous("epoch " + std::to_string(epoch) + " started: a majority joined");
    auto waiting = std::move(held);
    held.clear();
    for (auto& [node, h] : waiting) {
      const bool rejoined = !ever_joined.insert(node).second;
      h.entry.joined_epoch = epoch;
      h.entry.last_heartbeat = clock::now();
      log("node %lld (%s) %s: epoch %llu (a majority)", static_cast<long long>(node),
          h.entry.host.c_str(), rejoined ? "rejoined" : "joined",
          static_cast<unsigned long long>(epoch));
      members.emplace(node, h.entry);
      broadcast(node_joined{node, h.entry.host, epoch, rejoined});
    }
    const auto ev = snapshot();
    broadcast(ev);
    for (auto& [node, h] : waiting) h.promise.deliver(ev);
    return promise;
  }

  // Held joins past their time: answered no_quorum (the agents retry).
  void expire_held(clock::time_point now) {
    for (auto i = held.begin(); i != held.end();) {
      if (i->second.until > now) {
        ++i;
        continue;
      }
      i->second.promise.deliver(make_error(
          cluster_errc::no_quorum,
          caf::make_message("no majority yet: " + quorum_status())));
      self->demonitor(i->second.entry.agent);
      i = held.erase(i);
    }
  }

  caf::result<epoch_started> on_join(join_proof& p) {
    auto now = clock::now();
    auto i = challenges.find(p.nonce);
    if (i == challenges.end())
      return refuse(p.node_id, p.host, cluster_errc::bad_challenge, "unknown or used nonce");
    auto ch = i->second;
    challenges.erase(i);
    if (ch.expires <= now)
      return refuse(p.node_id, p.host, cluster_errc::bad_challenge, "challenge expired");
    if (ch.node_id != p.node_id)
      return refuse(p.node_id, p.host, cluster_errc::bad_challenge,
                    "nonce was issued to node " + std::to_string(ch.node_id));
    if (ch.source != sender_node())
      return refuse(p.node_id, p.host, cluster_errc::bad_challenge,
                    "nonce was issued to another connection");
    if (!verify_join_mac(secret, p.nonce, p.node_id, p.mac))
      return refuse(p.node_id, p.host, cluster_errc::auth_failed,
                    "HMAC does not match (wrong cluster secret?)");
    if (!p.agent)
      return refuse(p.node_id, p.host, cluster_errc::bad_challenge, "no agent handle");
    // The agent is bound to the process that proved the secret: a proof cannot enrol
    // an actor of another process.
    if (p.agent.node() != sender_node())
      return refuse(p.node_id, p.host, cluster_errc::bad_challenge,
                    "the agent handle belongs to another process than the proof");
    auto existing = members.find(p.node_id);
    if (existing != members.end() && existing->second.agent == p.agent)
      return snapshot(); // a repeated join of the same incarnation
    // Another process with a held id: refused while the holder lives. Evicting the
    // holder instead livelocked the job (issue 28: the evicted node rejoined at once and
    // evicted the other, 241 epochs and no step in 30 s). A real replacement (the holder
    // died) joins on a retry once the down message or the heartbeat timeout removed it.
    if (existing != members.end())
      return refuse(p.node_id, p.host, cluster_errc::node_id_taken,
                    "node " + std::to_string(p.node_id) + " is held by a live member (host "
                        + existing->second.host + ", joined in epoch "
                        + std::to_string(existing->second.joined_epoch) + ", last heartbeat "
                        + std::to_string(ms_between(existing->second.last_heartbeat, now))
                        + " ms ago): a second node with that id is refused until the "
                          "holder is gone");
    member_entry m;
    m.node_id = p.node_id;
    m.agent = p.agent;
    m.host = p.host;
    m.last_heartbeat = now;
    if (!has_quorum()) return hold(std::move(m));
    ++epoch;
    end_rendezvous("epoch " + std::to_string(epoch) + " started: node "
                   + std::to_string(p.node_id) + " joined");
    bool rejoined = !ever_joined.insert(p.node_id).second;
    m.joined_epoch = epoch;
    self->monitor(m.agent);
    members.emplace(p.node_id, std::move(m));
    log("node %lld (%s) %s: epoch %llu, world %zu", static_cast<long long>(p.node_id),
        p.host.c_str(), rejoined ? "rejoined" : "joined",
        static_cast<unsigned long long>(epoch), members.size());
    broadcast(node_joined{p.node_id, p.host, epoch, rejoined});
    auto ev = snapshot();
    broadcast(ev);
    return ev;
  }

  caf::result<std::uint64_t> on_heartbeat(std::int64_t node_id) {
    auto i = members.find(node_id);
    auto sender = caf::actor_cast<caf::actor>(self->current_sender());
    if (i == members.end() || i->second.agent != sender)
      return make_error(cluster_errc::not_a_member,
                        caf::make_message("node " + std::to_string(node_id)
                                          + " is not a member of epoch "
                                          + std::to_string(epoch)));
    i->second.last_heartbeat = clock::now();
    return epoch;
  }

  void on_down(const caf::down_msg& dm) {
    for (auto i = held.begin(); i != held.end(); ++i)
      if (i->second.entry.agent.address() == dm.source) {
        held.erase(i);
        return;
      }
    for (auto& [id, m] : members) {
      if (m.agent.address() == dm.source) {
        auto node = id;
        lose(node, "down: " + self->system().render(dm.reason), 0);
        return;
      }
    }
  }

  void on_check() {
    auto now = clock::now();
    auto late = now - last_check;
    last_check = now;
    self->delayed_send(self, check_interval, check_atom::value);
    expire_held(now);
    // This actor (or its whole process) was stalled: heartbeats may still be
    // queued behind this timer. Give everyone a fresh start instead of
    // declaring the world dead.
    if (late > 2 * check_interval + cfg.settings.heartbeat_timeout / 2) {
      log("check timer %lld ms late: heartbeat deadlines reset",
          static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(late).count()));
      for (auto& [id, m] : members)
        m.last_heartbeat = now;
      return;
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> silent; // node, ms since heartbeat
    for (auto& [id, m] : members) {
      auto age = ms_between(m.last_heartbeat, now);
      if (age > cfg.settings.heartbeat_timeout.count())
        silent.emplace_back(id, age);
    }
    // All silent ones at once: a partition that leaves this coordinator in the minority
    // forms no epoch with part of the lost side first.
    if (!silent.empty() && cfg.quorum > 0 &&
        static_cast<std::int32_t>(members.size() - silent.size()) + left_in_order < cfg.quorum) {
      for (std::size_t i = 0; i + 1 < silent.size(); ++i)
        remove(silent[i].first, "heartbeat timeout", silent[i].second, now);
      silent.erase(silent.begin(), silent.end() - 1);
    }
    for (auto& [id, age] : silent) {
      lose(id, "heartbeat timeout (" + std::to_string(age) + " ms without a heartbeat)", age);
      if (!has_quorum()) return;  // this coordinator has stopped
    }
  }
};

caf::behavior coordinator_impl(caf::stateful_actor<coordinator_state>* self,
                               coordinator_config cfg, std::string secret) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.secret = std::move(secret);
  st.coordinator_id = std::stoull(make_nonce().substr(0, 15), nullptr, 16) + 1;
  auto timeout = st.cfg.settings.heartbeat_timeout;
  st.check_interval = std::max(std::chrono::milliseconds{10}, timeout / 10);
  st.last_check = clock::now();
  self->set_down_handler([self](caf::down_msg& dm) { self->state.on_down(dm); });
  self->delayed_send(self, st.check_interval, check_atom::value);
  return {
      [self](hello_atom, std::int64_t node_id, const std::string& node_nonce) {
        return self->state.on_hello(node_id, node_nonce);
      },
      [self](join_atom, join_proof& p) { return self->state.on_join(p); },
      [self](heartbeat_atom, std::int64_t node_id, std::uint64_t) {
        return self->state.on_heartbeat(node_id);
      },
      [self](members_atom) -> caf::result<epoch_started> {
        // The member table (hosts, ranks) is for members only.
        if (!self->state.from_any_member()) return self->state.refuse_stranger("member table request");
        return self->state.snapshot();
      },
      [self](leave_atom, std::int64_t node_id, const std::string& why) {
        return self->state.on_leave(node_id, why);
      },
      [self](rendezvous_atom, std::uint64_t epoch, std::int32_t rank, std::string& payload) {
        return self->state.on_rendezvous(epoch, rank, payload);
      },
      [self](restarted_atom, std::int64_t node_id, const std::string& why) {
        return self->state.on_worker_restart(node_id, why);
      },
      [self](retire_atom, std::int64_t node_id, const std::string& why) {
        return self->state.retire(node_id, why);
      },
      [self](replan_atom, std::int64_t node_id, std::uint64_t for_epoch, std::int64_t lost_node,
             const std::string& why) {
        return self->state.on_replan(node_id, for_epoch, lost_node, why);
      },
      // A node measuring its clock offset (cluster_messages.hpp): only the time.
      [self](clock_atom) { return metrics::trace_now_us(self->state.cfg.trace.get()); },
      [self](check_atom) { self->state.on_check(); },
  };
}

} // namespace

caf::expected<caf::actor> spawn_coordinator(caf::actor_system& sys, coordinator_config cfg) {
  auto secret = resolve_secret(cfg.settings);
  if (!secret) return no_secret_error();
  return sys.spawn(coordinator_impl, std::move(cfg), std::move(*secret));
}

caf::expected<std::uint16_t> publish_coordinator(caf::actor_system& sys,
                                                 const caf::actor& coordinator,
                                                 std::uint16_t port, const std::string& host,
                                                 bool tls) {
  // CAF listens on loopback only; the public address is the handshake gate's, which
  // lives as long as the coordinator (a restart publishes again, on the same port).
  auto inner = tls ? caf::openssl::publish(coordinator, 0, "127.0.0.1", true)
                   : sys.middleman().publish(coordinator, 0, "127.0.0.1", true);
  if (!inner) return inner;
  try {
    auto gate = std::make_shared<HandshakeGate>(host, port, *inner);
    const auto bound = gate->port();
    coordinator->attach_functor([gate]() mutable { gate.reset(); });
    return bound;
  } catch (const std::exception& failure) {
    return caf::make_error(caf::sec::cannot_open_port, std::string{failure.what()});
  }
}

} // namespace dseek::actors
