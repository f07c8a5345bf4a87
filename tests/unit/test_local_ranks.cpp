// Nodes with several ranks (cluster.gpus_per_node = G), the parts that need no process:
// the coordinator's plan gives member k of the table ranks kG .. kG+G-1 and completes a
// rendezvous once all of them contributed; a node finds its local ranks in the plan and
// prints the layout; each worker group's actors have names of their own (group 0 keeps
// a one-group node's); the config takes pipeline, tensor and 3D jobs whose layout fills
// the nodes x G world and refuses the others by name, and
// crash_actor's "actor@local rank" targets are checked. The multi-process behaviour
// (training, node loss, group crash) is in tests/integration/test_multi_rank_nodes.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/cluster/cluster_settings.hpp"
#include "actors/cluster/coordinator.hpp"
#include "actors/faults/fault_actions.hpp"
#include "actors/control/data_plane_link.hpp"
#include "actors/control/layout_placement.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/config/load.hpp"
#include "support/coordinator_join.hpp"

namespace actors = dseek::actors;
namespace config = dseek::config;
using namespace std::chrono_literals;
using dseek::testing::join_coordinator;

namespace {

config::JobConfig config_with(const std::vector<std::string>& overrides) {
  auto job = config::default_config();
  for (const auto& line : overrides) config::apply_override(job, line);
  return job;
}

}  // namespace

TEST_CASE("the coordinator plans G ranks a member and waits for all of them to meet",
          "[local_ranks]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  actors::coordinator_config cc;
  cc.settings.secret = "local-ranks-secret";
  cc.log = false;
  cc.ranks_per_node = 2;
  auto coordinator = actors::spawn_coordinator(sys, cc);
  REQUIRE(coordinator);
  caf::scoped_actor agent0{sys}, agent1{sys};
  join_coordinator(agent0, *coordinator, 0, cc.settings.secret);
  const auto epoch = join_coordinator(agent1, *coordinator, 1, cc.settings.secret);

  CHECK(epoch.world_size == 2);  // members (nodes)
  CHECK(actors::ranks_in_plan(epoch) == 4);
  CHECK(actors::rank_in_plan(epoch, 0, 0) == 0);
  CHECK(actors::rank_in_plan(epoch, 0, 1) == 1);
  CHECK(actors::rank_in_plan(epoch, 1, 0) == 2);
  CHECK(actors::rank_in_plan(epoch, 1, 1) == 3);
  CHECK(actors::rank_in_plan(epoch, 1, 2) == -1);
  CHECK(actors::rank_layout(epoch) == "node 0: ranks 0-1, node 1: ranks 2-3");

  // Every rank of the plan contributes from its own thread (as the worker groups do);
  // the first three wait for the fourth.
  // (and get one data-plane key, the same for all of them)
  std::mutex keys_mutex;
  std::set<std::uint64_t> keys;
  auto contribute = [&](std::int32_t rank) {
    caf::scoped_actor self{sys};
    std::vector<std::string> payloads;
    self->request(*coordinator, 10s, actors::rendezvous_atom::value, epoch.epoch, rank,
                  "address-" + std::to_string(rank))
        .receive(
            [&](actors::rendezvous_result& result) {
              payloads = result.payloads;
              std::lock_guard lock(keys_mutex);
              keys.insert(result.data_key);
            },
            [](caf::error&) {});
    return payloads;
  };
  std::vector<std::future<std::vector<std::string>>> waiting;
  for (std::int32_t rank = 0; rank < 3; ++rank)
    waiting.push_back(std::async(std::launch::async, contribute, rank));
  for (auto& w : waiting) CHECK(w.wait_for(300ms) == std::future_status::timeout);
  const auto last = contribute(3);
  const std::vector<std::string> expected = {"address-0", "address-1", "address-2",
                                             "address-3"};
  CHECK(last == expected);
  for (auto& w : waiting) CHECK(w.get() == expected);
  CHECK(keys.size() == 1);
  CHECK(*keys.begin() != 0);

  // A rank past the plan is refused.
  caf::scoped_actor self{sys};
  bool refused = false;
  self->request(*coordinator, 5s, actors::rendezvous_atom::value, epoch.epoch,
                std::int32_t{4}, std::string("address-4"))
      .receive([](actors::rendezvous_result&) {}, [&](caf::error&) { refused = true; });
  CHECK(refused);
  caf::anon_send_exit(*coordinator, caf::exit_reason::user_shutdown);
}

TEST_CASE("a one-rank plan: the node's local rank 0 is its rank", "[local_ranks]") {
  actors::epoch_started epoch;
  for (int node = 0; node < 3; ++node) {
    epoch.members.push_back({node, node, "127.0.0.1", 1});
    epoch.plan.push_back({node, "worker", node});
  }
  CHECK(actors::ranks_in_plan(epoch) == 3);
  CHECK(actors::rank_in_plan(epoch, 2) == 2);
  CHECK(actors::rank_in_plan(epoch, 2, 1) == -1);
  CHECK(actors::rank_layout(epoch) == "node 0: rank 0, node 1: rank 1, node 2: rank 2");
}

namespace {
// An epoch whose members 0 .. nodes-1 run `g` ranks each (the coordinator's plan).
actors::epoch_started planned_epoch(int nodes, int g) {
  actors::epoch_started epoch;
  epoch.epoch = 1;
  epoch.world_size = nodes;
  for (int node = 0; node < nodes; ++node) {
    epoch.members.push_back(actors::member_info{node, node, "127.0.0.1", 1});
    for (int local = 0; local < g; ++local)
      epoch.plan.push_back(actors::worker_assignment{node, "worker", node * g + local});
  }
  return epoch;
}
}  // namespace

TEST_CASE("the placement says which node holds which rank, stage and tensor rank",
          "[local_ranks]") {
  // Megatron's shape: T = 2 = G, so each tensor group is one node.
  CHECK(actors::layout_placement(planned_epoch(2, 2), {1, 2, 2}) ==
        "data 1 x pipeline 2 x tensor 2 on 4 ranks of 2 node(s)\n"
        "  node 0: rank 0 (replica 0, stage 0, tensor rank 0), rank 1 (replica 0, stage 0, "
        "tensor rank 1)\n"
        "  node 1: rank 2 (replica 0, stage 1, tensor rank 0), rank 3 (replica 0, stage 1, "
        "tensor rank 1)");
  // T = 2 over G = 3: the group of ranks 2 and 3 spans nodes 0 and 1, said once.
  const std::string spanning = actors::layout_placement(planned_epoch(2, 3), {1, 3, 2});
  CHECK_THAT(spanning, Catch::Contains("node 0: rank 0 (replica 0, stage 0, tensor rank 0), "
                                       "rank 1 (replica 0, stage 0, tensor rank 1), rank 2 "
                                       "(replica 0, stage 1, tensor rank 0)"));
  CHECK_THAT(spanning, Catch::Contains("a tensor group spans nodes"));
  // A re-planned layout smaller than the world: the ranks past it stand by.
  CHECK(actors::layout_placement(planned_epoch(1, 3), {1, 1, 2}) ==
        "data 1 x pipeline 1 x tensor 2 on 3 ranks of 1 node(s)\n"
        "  node 0: rank 0 (replica 0, stage 0, tensor rank 0), rank 1 (replica 0, stage 0, "
        "tensor rank 1), rank 2 (standby)");
}

TEST_CASE("each worker group's actors have names of their own", "[local_ranks]") {
  namespace names = actors::names;
  CHECK(names::worker_of(0) == names::worker);
  CHECK(names::data_prefetcher_of(0) == names::data_prefetcher);
  CHECK(names::gradient_shard(3) == caf::atom("dsshard3"));
  std::set<caf::atom_value> seen;
  for (int local_rank = 0; local_rank < 64; ++local_rank) {
    seen.insert(names::worker_of(local_rank));
    seen.insert(names::data_prefetcher_of(local_rank));
    seen.insert(names::pipeline_stage_of(local_rank));
    for (int shard = 0; shard < 64; ++shard) seen.insert(names::gradient_shard(shard, local_rank));
  }
  CHECK(names::pipeline_stage_of(0) == names::pipeline_stage);
  CHECK(seen.size() == 64u * (3 + 64));
}

TEST_CASE("several ranks a node: the batch splits over every rank of a data-parallel job",
          "[local_ranks][config]") {
  auto two_by_two = config_with({"cluster.nodes=2", "cluster.gpus_per_node=2",
                                 "train.batch_size=12"});
  CHECK_NOTHROW(config::validate(two_by_two));
  CHECK_NOTHROW(config::check_supported(two_by_two));
  // 12 sequences over 2 x 5 ranks do not split evenly.
  auto uneven = config_with({"cluster.nodes=2", "cluster.gpus_per_node=5",
                             "train.batch_size=12"});
  CHECK_THROWS_WITH(config::validate(uneven),
                    Catch::Contains("cluster.nodes x cluster.gpus_per_node (10)"));
  // A data-parallel job's degree is the world: parallel.data counts replicas of groups.
  auto replicas = config_with({"cluster.nodes=2", "cluster.gpus_per_node=2",
                               "parallel.data=4", "train.batch_size=12"});
  CHECK_THROWS_WITH(config::check_supported(replicas),
                    Catch::Contains("cluster.gpus_per_node = 2") &&
                        Catch::Contains("leave parallel.data at 1"));
}

// Megatron's shape: tensor parallelism inside a host, pipeline and data across hosts.
TEST_CASE("several ranks a node: pipeline, tensor and 3D jobs fill the world of nodes x G",
          "[local_ranks][config]") {
  for (const auto& shape : std::vector<std::vector<std::string>>{
           {"parallel.pipeline=2", "parallel.tensor=2"},
           {"parallel.pipeline=2", "parallel.data=2", "train.micro_batch_size=2"},
           {"parallel.tensor=2", "parallel.data=2"},
           {"parallel.pipeline=4"}}) {
    auto settings = shape;
    settings.push_back("cluster.nodes=2");
    settings.push_back("cluster.gpus_per_node=2");
    settings.push_back("train.batch_size=12");
    INFO(settings[0] << " " << settings[1]);
    auto job = config_with(settings);
    CHECK_NOTHROW(config::validate(job));
    CHECK_NOTHROW(config::check_supported(job));
  }
  // A tensor group of 2 on one node with 2 ranks.
  auto one_node = config_with({"cluster.gpus_per_node=2", "parallel.tensor=2"});
  CHECK_NOTHROW(config::validate(one_node));
  CHECK_NOTHROW(config::check_supported(one_node));
  // The world (2 x 2 ranks) must be the layout's ranks, refused by name.
  auto too_few = config_with({"cluster.nodes=2", "cluster.gpus_per_node=2",
                              "parallel.pipeline=2", "train.batch_size=12"});
  CHECK_THROWS_WITH(config::validate(too_few),
                    Catch::Contains("parallel.pipeline (2) must equal cluster.nodes x "
                                    "cluster.gpus_per_node (4)"));
  auto three_d = config_with({"cluster.nodes=2", "cluster.gpus_per_node=2",
                              "parallel.pipeline=2", "parallel.tensor=2", "parallel.data=2",
                              "train.batch_size=12"});
  CHECK_THROWS_WITH(config::validate(three_d),
                    Catch::Contains("parallel.data (2) x parallel.tensor (2) x "
                                    "parallel.pipeline (2) must equal cluster.nodes x "
                                    "cluster.gpus_per_node (4)"));
  auto tensor = config_with({"cluster.gpus_per_node=2", "parallel.tensor=4"});
  CHECK_THROWS_WITH(config::validate(tensor),
                    Catch::Contains("parallel.tensor (4) must equal cluster.nodes x "
                                    "cluster.gpus_per_node (2)"));
  // A node's stage of local rank 1 may crash, in a tensor-parallel job too (its ranks
  // run the stage trainer in their pipeline_stage); there is none in a data-parallel one.
  auto crash = config_with({"cluster.nodes=2", "cluster.gpus_per_node=2",
                            "parallel.pipeline=2", "parallel.tensor=2", "train.batch_size=12",
                            "faults=[{kind = \"crash_actor\", actor = \"pipeline_stage@1\", "
                            "node = 1, step = 3}]"});
  CHECK_NOTHROW(config::check_supported(crash));
  auto tensor_stage = config_with({"cluster.gpus_per_node=2", "parallel.tensor=2",
                                   "faults=[{kind = \"crash_actor\", actor = \"pipeline_stage@1\", "
                                   "node = 0, step = 3}]"});
  CHECK_NOTHROW(config::check_supported(tensor_stage));
  auto no_stage = config_with({"cluster.gpus_per_node=2",
                               "faults=[{kind = \"crash_actor\", actor = \"pipeline_stage@1\", "
                               "node = 0, step = 3}]"});
  CHECK_THROWS_WITH(config::check_supported(no_stage),
                    Catch::Contains("[[faults]]") &&
                        Catch::Contains("only a pipeline or tensor-parallel job"));
}

TEST_CASE("crash_actor names a worker group's actor by local rank", "[local_ranks][faults]") {
  auto crash = [](const std::string& actor) {
    config::FaultSpec fault;
    fault.kind = config::FaultKind::crash_actor;
    fault.actor = actor;
    fault.step = 3;
    return std::vector<config::FaultSpec>{fault};
  };
  CHECK_NOTHROW(actors::check_fault_targets(crash("gradient_shard@1"), 2));
  CHECK_NOTHROW(actors::check_fault_targets(crash("worker@1"), 2));
  CHECK_NOTHROW(actors::check_fault_targets(crash("worker"), 1));
  CHECK_NOTHROW(actors::check_fault_targets(crash("data_prefetcher@1"), 2));
  CHECK_NOTHROW(actors::check_fault_targets(crash("pipeline_stage@1"), 2));
  CHECK_THROWS_WITH(actors::check_fault_targets(crash("worker@2"), 2),
                    Catch::Contains("below cluster.gpus_per_node (2)"));
  CHECK_THROWS_WITH(actors::check_fault_targets(crash("worker@x"), 2),
                    Catch::Contains("below cluster.gpus_per_node"));
  CHECK_THROWS_WITH(actors::check_fault_targets(crash("membership@1"), 2),
                    Catch::Contains("only worker, gradient_shard, data_prefetcher and "
                                    "pipeline_stage"));
}
