// Sub-group scenarios: even and odd ranks (data-parallel style), a group in reversed
// order, and a one-rank group, each running collectives while world collectives are in
// flight too (their messages must never mix).
#include <algorithm>

#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

void check_group(Communicator& g, int salt) {
  for (size_t count : {size_t{5}, size_t{4099}, size_t{65537}}) {
    auto buf = make_input(DataType::f32, count, g.rank(), salt);
    g.all_reduce(buf.data(), count, DataType::f32, ReduceOp::sum).wait();
    for (size_t i = 0; i < count; ++i)
      expect_close(get(buf, DataType::f32, i), reference(ReduceOp::sum, g.size(), i, salt), DataType::f32,
                   "subgroup all_reduce of " + std::to_string(g.size()) + " ranks");
    const auto expected = make_input(DataType::bf16, count, g.size() - 1, salt);
    auto b = g.rank() == g.size() - 1 ? expected : std::vector<uint8_t>(expected.size(), 0);
    g.broadcast(b.data(), count, DataType::bf16, g.size() - 1).wait();
    require(b == expected, "subgroup broadcast");
  }
  g.barrier().wait();
}

const RegisterScenario subgroups("subgroups", [](RankEnv& env) {
  std::vector<int> even, odd, reversed;
  for (int r = 0; r < env.size; ++r) (r % 2 == 0 ? even : odd).push_back(r);
  for (int r = env.size; r-- > 0;) reversed.push_back(r);
  // Every rank creates every group, in the same order; non-members get nullptr.
  auto g_even = env.comm->subgroup(even);
  auto g_odd = odd.empty() ? nullptr : env.comm->subgroup(odd);
  auto g_rev = env.comm->subgroup(reversed);
  auto g_self = env.comm->subgroup({env.size - 1});
  require((g_even != nullptr) == (env.rank % 2 == 0), "even group membership");
  require((g_odd != nullptr) == (env.rank % 2 == 1), "odd group membership");
  require(g_rev && g_rev->rank() == env.size - 1 - env.rank, "reversed group rank");
  require((g_self != nullptr) == (env.rank == env.size - 1), "one-rank group membership");

  // A world all-reduce in flight while the sub-groups work.
  const size_t big = 200001;
  auto world_buf = make_input(DataType::f32, big, env.rank, 999);
  Work world = env.comm->all_reduce(world_buf.data(), big, DataType::f32, ReduceOp::sum);
  check_group(g_even ? *g_even : *g_odd, 1);
  check_group(*g_rev, 2);
  if (g_self) check_group(*g_self, 3);
  world.wait();
  for (size_t i = 0; i < big; ++i)
    expect_close(get(world_buf, DataType::f32, i), reference(ReduceOp::sum, env.size, i, 999), DataType::f32, "world all_reduce");
});

}  // namespace
}  // namespace dseek::comm::test
