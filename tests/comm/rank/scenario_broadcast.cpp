// Broadcast scenarios: from every root, small (direct) and large (pipelined chain).
#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

const RegisterScenario broadcast("broadcast", [](RankEnv& env) {
  int salt = 0;
  for (DataType type : {DataType::f32, DataType::u8})
    for (size_t count : test_sizes())
      for (int root = 0; root < env.size; ++root) {
        ++salt;
        const auto expected = make_input(type, count, root, salt);
        auto buf = env.rank == root ? expected : std::vector<uint8_t>(expected.size(), 0x5A);
        env.comm->broadcast(buf.data(), count, type, root).wait();
        require(buf == expected, label("broadcast", type, count, " root " + std::to_string(root)) + ": wrong result");
      }
});

}  // namespace
}  // namespace dseek::comm::test
