// All-gather scenarios: every rank contributes its shard; everyone gets the whole
// buffer, out of place and in place, for f32, bf16 and raw bytes.
#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

const RegisterScenario all_gather("all_gather", [](RankEnv& env) {
  int salt = 0;
  for (DataType type : {DataType::f32, DataType::bf16, DataType::u8})
    for (size_t count : test_sizes())
      for (bool in_place : {false, true}) {
        ++salt;
        const size_t es = element_size(type);
        const size_t mine = env.comm->shard_count(count), offset = env.comm->shard_offset(count);
        // Everybody's expected full buffer: shard r comes from rank r.
        std::vector<uint8_t> expected(count * es);
        for (int r = 0; r < env.size; ++r) {
          const size_t n = shard_count(count, env.size, r), o = shard_offset(count, env.size, r);
          auto part = make_input(type, n, r, salt, o);
          std::copy(part.begin(), part.end(), expected.begin() + static_cast<std::ptrdiff_t>(o * es));
        }
        auto in = make_input(type, mine, env.rank, salt, offset);
        std::vector<uint8_t> out(count * es, 0xEF);
        const void* src = in.data();
        if (in_place) {
          std::copy(in.begin(), in.end(), out.begin() + static_cast<std::ptrdiff_t>(offset * es));
          src = out.data() + offset * es;
        }
        env.comm->all_gather(src, out.data(), count, type).wait();
        require(out == expected, label("all_gather", type, count, in_place ? " in place" : "") + ": wrong result");
      }
});

}  // namespace
}  // namespace dseek::comm::test
