// The soak's random fault schedule (actors/faults/random_faults.hpp): fixed by its seed,
// every recoverable kind in it (crash_actor of every actor of the layout), a killed
// node's kill its last fault, no hang of the coordinator's node; and its inline TOML
// (config::faults_inline_toml) reads back through the config loader to the same faults.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "actors/faults/fault_actions.hpp"
#include "actors/faults/random_faults.hpp"
#include "runtime/config/load.hpp"

using namespace dseek;
using config::FaultKind;

namespace {

bool same(const config::FaultSpec& a, const config::FaultSpec& b) {
  return a.kind == b.kind && a.node == b.node && a.step == b.step &&
         a.after_seconds == b.after_seconds && a.seconds == b.seconds &&
         a.fraction == b.fraction && a.ms == b.ms && a.actor == b.actor && a.during == b.during;
}

int count_of(const std::vector<config::FaultSpec>& faults, FaultKind kind) {
  return static_cast<int>(std::count_if(faults.begin(), faults.end(),
                                        [kind](const auto& f) { return f.kind == kind; }));
}

}  // namespace

TEST_CASE("random faults: a seed gives one schedule, another seed another", "[faults][soak]") {
  const actors::RandomFaultsShape shape{4, 60, false, 0};
  const auto a = actors::random_faults(7, shape);
  const auto b = actors::random_faults(7, shape);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(same(a[i], b[i]));
  CHECK(config::faults_inline_toml(a) != config::faults_inline_toml(actors::random_faults(8, shape)));
}

TEST_CASE("random faults: every kind, every actor, the kill last on its node", "[faults][soak]") {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    INFO("seed " << seed);
    // Odd seeds: a pipeline or tensor job; every third: AdamW on the device (no shards).
    const actors::RandomFaultsShape shape{4, 60, seed % 2 == 1, static_cast<int64_t>(seed % 4),
                                          seed % 3 != 0};
    const auto faults = actors::random_faults(seed, shape);
    CHECK(count_of(faults, FaultKind::kill) == 1);
    CHECK(count_of(faults, FaultKind::hang) >= 1);
    CHECK(count_of(faults, FaultKind::slow) >= 1);
    CHECK(count_of(faults, FaultKind::drop_messages) >= 1);
    CHECK(count_of(faults, FaultKind::corrupt_gradient) == 0);
    std::set<std::string> crashed;
    const config::FaultSpec& kill = faults.front();
    for (const auto& fault : faults) {
      CHECK(fault.node >= 0);
      CHECK(fault.node < 4);
      CHECK(fault.step >= 2);
      CHECK(fault.step <= 57);
      if (fault.kind == FaultKind::crash_actor) crashed.insert(fault.actor);
      if (fault.kind == FaultKind::hang) {
        CHECK(fault.node != shape.coordinator_node);
        CHECK(fault.seconds >= 2.0);
        CHECK(fault.seconds <= 4.0);
      }
      if (fault.kind == FaultKind::drop_messages) CHECK(fault.fraction <= 0.5);
      if (&fault != &kill && fault.node == kill.node) CHECK(fault.step < kill.step);
    }
    std::set<std::string> expected;
    for (const auto& actor : actors::crashable_actors())
      if (actor != "node" && (actor != "pipeline_stage" || shape.staged) &&
          (actor != "gradient_shard" || (!shape.staged && shape.gradient_shards)))
        expected.insert(actor);
    CHECK(crashed == expected);
  }
}

TEST_CASE("random faults: the schedule's inline TOML loads back to the same faults",
          "[faults][soak]") {
  auto faults = actors::random_faults(42, {4, 60, false, 0});
  config::FaultSpec timed;
  timed.kind = FaultKind::hang;
  timed.node = 2;
  timed.after_seconds = 2.25;
  timed.seconds = 0.1;
  faults.push_back(timed);
  const std::string setting = "faults=" + config::faults_inline_toml(faults);
  INFO(setting);
  const auto loaded = config::load_config_text("", "test", {"cluster.nodes=4", setting});
  REQUIRE(loaded.faults.size() == faults.size());
  for (size_t i = 0; i < faults.size(); ++i) CHECK(same(loaded.faults[i], faults[i]));
}

TEST_CASE("random faults: a job too small for a schedule is refused", "[faults][soak]") {
  CHECK_THROWS_WITH(actors::random_faults(1, {2, 60, false, 0}),
                    Catch::Contains("at least 3 nodes and 8 steps (got 2 nodes, 60 steps)"));
  CHECK_THROWS_WITH(actors::random_faults(1, {4, 7, false, 0}),
                    Catch::Contains("(got 4 nodes, 7 steps)"));
}
