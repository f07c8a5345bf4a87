// Reduce-scatter scenarios: each rank's shard of the reduction, for every op, type, size.
#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

const RegisterScenario reduce_scatter("reduce_scatter", [](RankEnv& env) {
  int salt = 0;
  for (DataType type : {DataType::f32, DataType::bf16})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (size_t count : test_sizes()) {
        ++salt;
        const auto in = make_input(type, count, env.rank, salt);
        const auto original = in;
        const size_t mine = env.comm->shard_count(count), offset = env.comm->shard_offset(count);
        std::vector<uint8_t> out(std::max<size_t>(1, mine) * element_size(type), 0xCD);
        env.comm->reduce_scatter(in.data(), out.data(), count, type, op).wait();
        const std::string where = label("reduce_scatter", type, count, std::string(" ") + to_string(op));
        for (size_t i = 0; i < mine; ++i)
          expect_close(get(out, type, i), reference(op, env.size, offset + i, salt), type, where);
        require(in == original, where + ": the input was modified");
      }
});

}  // namespace
}  // namespace dseek::comm::test
