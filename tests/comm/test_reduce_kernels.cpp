// In-process checks of the arithmetic and the shard rule the collectives rely on.
#include <catch2/catch.hpp>

#include <vector>

#include "comm/bf16.hpp"
#include "comm/group.hpp"
#include "comm/reduce_kernels.hpp"

using namespace dseek::comm;

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN", "[comm][kernels]") {
  CHECK(bf16_to_float(float_to_bf16(1.0f)) == 1.0f);
  CHECK(bf16_to_float(float_to_bf16(1.00390625f)) == 1.0f);      // halfway: to even
  CHECK(bf16_to_float(float_to_bf16(1.01171875f)) == 1.015625f);  // halfway: to even (up)
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST_CASE("reduce kernels sum and max in fp32 for bf16", "[comm][kernels]") {
  std::vector<uint16_t> a{float_to_bf16(1.5f), float_to_bf16(-2.0f)}, b{float_to_bf16(0.25f), float_to_bf16(3.0f)};
  std::vector<uint16_t> out(2);
  reduce_into(out.data(), a.data(), b.data(), 2, DataType::bf16, ReduceOp::sum);
  CHECK(bf16_to_float(out[0]) == 1.75f);
  CHECK(bf16_to_float(out[1]) == 1.0f);
  reduce_into(out.data(), a.data(), b.data(), 2, DataType::bf16, ReduceOp::max);
  CHECK(bf16_to_float(out[0]) == 1.5f);
  CHECK(bf16_to_float(out[1]) == 3.0f);
  CHECK_THROWS_AS(reduce_into(out.data(), a.data(), b.data(), 2, DataType::u8, ReduceOp::sum), CommError);
}

TEST_CASE("shards cover any length exactly once", "[comm][kernels]") {
  for (size_t count : {0, 1, 2, 3, 7, 100, 101}) {
    for (int ranks : {1, 2, 3, 4, 7}) {
      size_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        CHECK(shard_offset(count, ranks, r) == next);
        next += shard_count(count, ranks, r);
      }
      CHECK(next == count);
    }
  }
}

// The shared-memory all-reduce's one-pass kernel must give the bits of the step-by-step
// fp32 accumulation it replaced (what the ring's owner computes too), in place as well.
TEST_CASE("reduce_sources_f32 gives the bits of accumulate_f32 then store_from_f32", "[comm][kernels]") {
  for (DataType type : {DataType::f32, DataType::bf16})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max})
      for (int n : {1, 2, 3, 4, 5, 6})
        for (size_t count : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, size_t{4099}}) {
          const size_t es = element_size(type);
          const float factor = op == ReduceOp::sum ? 1.0f / static_cast<float>(n) : 1.0f;
          std::vector<std::vector<uint8_t>> src(static_cast<size_t>(n), std::vector<uint8_t>(count * es));
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) {
              // Values whose sums round differently in another order: the order is under test too.
              const float v = static_cast<float>((i * 7919 + static_cast<size_t>(r) * 104729) % 2003) * 0.37f - 350.0f +
                              static_cast<float>(r) * 1e-3f;
              if (type == DataType::f32) reinterpret_cast<float*>(src[static_cast<size_t>(r)].data())[i] = v;
              else reinterpret_cast<uint16_t*>(src[static_cast<size_t>(r)].data())[i] = float_to_bf16(v);
            }
          std::vector<float> acc(count);
          for (int r = 0; r < n; ++r) accumulate_f32(acc.data(), src[static_cast<size_t>(r)].data(), count, type, op, r == 0);
          std::vector<uint8_t> expected(count * es);
          store_from_f32(expected.data(), acc.data(), count, type, factor);

          // In place: the first destination is the last source (as `out` is this rank's input).
          std::vector<const void*> ptrs;
          for (auto& s : src) ptrs.push_back(s.data());
          std::vector<uint8_t> second(count * es, 0xAB);
          reduce_sources_f32(src.back().data(), second.data(), ptrs.data(), n, count, type, op, factor);
          INFO("type " << to_string(type) << " op " << to_string(op) << " n " << n << " count " << count);
          CHECK(src.back() == expected);
          CHECK(second == expected);
        }
}
