// A failed data-plane connect is re-planned (actors/control/connect_retry.hpp): the
// retry policy (backoff 250 ms, 500 ms, then the unreachable node is taken for lost;
// counted per node, reset by a connect that succeeds) and the coordinator's side of it
// (replan_atom): a new epoch with the same members, announced as node_lost so that the
// peers abort their connects; nothing for an epoch that is no longer current (another
// rank asked first); without the unreachable node when one is named. The multi-process
// case is the elastic test "a rejoin epoch whose data plane fails to connect ...".
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/cluster/coordinator.hpp"
#include "actors/control/connect_retry.hpp"
#include "support/coordinator_join.hpp"

namespace actors = dseek::actors;
using namespace std::chrono_literals;
using dseek::testing::join_coordinator;

namespace {

// The reason of the next node_lost in `agent`'s mailbox ("" if none comes within 2 s).
std::string next_lost_reason(caf::scoped_actor& agent) {
  std::string reason;
  for (bool done = false; !done;)
    agent->receive([&](const actors::node_lost& lost) { reason = lost.reason, done = true; },
                   [](const actors::epoch_started&) {}, [](const actors::node_joined&) {},
                   caf::after(2s) >> [&] { done = true; });
  return reason;
}

actors::epoch_started replan(caf::actor_system& sys, const caf::actor& coordinator,
                             std::int64_t node, std::uint64_t epoch, std::int64_t lost_node) {
  caf::scoped_actor self{sys};
  actors::epoch_started answer;
  self->request(coordinator, 5s, actors::replan_atom::value, node, epoch, lost_node,
                std::string("UCX error 'Destination is unreachable'"))
      .receive([&](actors::epoch_started& e) { answer = e; },
               [](caf::error&) { FAIL("replan refused"); });
  return answer;
}

}  // namespace

TEST_CASE("a failed connect is retried after 250 ms, then 500 ms, then its node is taken for lost",
          "[control][replan]") {
  actors::ConnectRetries retries;
  auto first = retries.failed(4);
  CHECK(first.attempt == 1);
  CHECK(first.backoff == 250ms);
  CHECK_FALSE(first.drop_peer);
  // Another node's count is its own.
  CHECK(retries.failed(5).attempt == 1);
  auto second = retries.failed(4);
  CHECK(second.attempt == 2);
  CHECK(second.backoff == 500ms);
  CHECK_FALSE(second.drop_peer);
  auto third = retries.failed(4);
  CHECK(third.attempt == actors::kConnectAttempts);
  CHECK(third.drop_peer);
  // After a drop the node starts again at 1 (it rejoins as a new member).
  CHECK(retries.failed(4).attempt == 1);
  // A connect that succeeds resets every count.
  retries.connected();
  CHECK(retries.failed(5).attempt == 1);
  CHECK(retries.failed(4).attempt == 1);
}

TEST_CASE("the coordinator re-plans a current epoch once, and drops a node named unreachable",
          "[control][replan]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  actors::coordinator_config cc;
  cc.settings.secret = "replan-secret";
  cc.log = false;
  auto coordinator = actors::spawn_coordinator(sys, cc);
  REQUIRE(coordinator);
  caf::scoped_actor agent0{sys}, agent1{sys}, agent2{sys};
  join_coordinator(agent0, *coordinator, 0, cc.settings.secret);
  join_coordinator(agent1, *coordinator, 1, cc.settings.secret);
  const auto joined = join_coordinator(agent2, *coordinator, 2, cc.settings.secret);
  REQUIRE(joined.world_size == 3);

  // Node 2 could not connect in the current epoch: a new one with the same members.
  const auto again = replan(sys, *coordinator, 2, joined.epoch, -1);
  CHECK(again.epoch == joined.epoch + 1);
  CHECK(again.world_size == 3);
  CHECK(next_lost_reason(agent0) ==
        "data plane failed on node 2: UCX error 'Destination is unreachable'");
  // Node 1 asks for the same failed epoch later: it is no longer current, nothing changes.
  const auto same = replan(sys, *coordinator, 1, joined.epoch, -1);
  CHECK(same.epoch == again.epoch);
  CHECK(same.world_size == 3);

  // The third failure in a row: node 0 is dropped.
  const auto without = replan(sys, *coordinator, 2, again.epoch, 0);
  CHECK(without.epoch == again.epoch + 1);
  CHECK(without.world_size == 2);
  for (const auto& member : without.members) CHECK(member.node_id != 0);
  // (Node 1 heard of both epochs, in order.)
  CHECK(next_lost_reason(agent1) ==
        "data plane failed on node 2: UCX error 'Destination is unreachable'");
  CHECK(next_lost_reason(agent1) ==
        "unreachable on the data plane from node 2: UCX error 'Destination is unreachable'");
  // A node cannot drop itself.
  const auto self_named = replan(sys, *coordinator, 2, without.epoch, 2);
  CHECK(self_named.epoch == without.epoch);
  caf::anon_send_exit(*coordinator, caf::exit_reason::user_shutdown);
}
