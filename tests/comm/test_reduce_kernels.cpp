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
