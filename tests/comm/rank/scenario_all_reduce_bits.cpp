// all_reduce_bits: every rank gets the same bits, with inputs whose sums round (hashed
// values in [-1, 1), unlike the exact quarters of the other scenarios), so an algorithm
// that reduced an element in a different order on different ranks would show. Checked
// against a double-precision serial reference too: f32 within 1e-5, bf16 within 1e-2
// (bf16 partial sums round at every step), relative to the sum of magnitudes.
#include <algorithm>
#include <cmath>

#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

float noisy_value(int r, size_t i, int salt) {
  return uniform((static_cast<uint64_t>(salt) * 64 + static_cast<uint64_t>(r)) * 0x100000000ull + i) *
         (1.0f + 7.0f * static_cast<float>(i % 5 == 0));
}

// The value rank r contributes, as the all-reduce sees it (rounded to bf16 for bf16).
double stored(DataType type, float v) { return type == DataType::bf16 ? bf16_to_float(float_to_bf16(v)) : v; }

void check(RankEnv& env, DataType type, ReduceOp op, size_t count, int salt) {
  std::vector<uint8_t> buf(count * element_size(type));
  for (size_t i = 0; i < count; ++i) {
    const float v = noisy_value(env.rank, i, salt);
    if (type == DataType::f32) reinterpret_cast<float*>(buf.data())[i] = v;
    else reinterpret_cast<uint16_t*>(buf.data())[i] = float_to_bf16(v);
  }
  env.comm->all_reduce(buf.data(), count, type, op).wait();
  const std::string what = label("all_reduce", type, count, std::string(" ") + to_string(op));
  const double rel = type == DataType::bf16 ? 1e-2 : 1e-5;
  for (size_t i = 0; i < count; ++i) {
    double want = op == ReduceOp::max ? -1e30 : 0.0, magnitude = 0.0;
    for (int r = 0; r < env.size; ++r) {
      const double v = stored(type, noisy_value(r, i, salt));
      want = op == ReduceOp::max ? std::max(want, v) : want + v;
      magnitude += std::abs(v);
    }
    if (op == ReduceOp::avg) {
      want /= env.size;
      magnitude /= env.size;
    }
    const double got = get(buf, type, i);
    if (!(std::abs(got - want) <= rel * std::max(magnitude, 1e-3)))
      fail(what + " index " + std::to_string(i) + ": got " + std::to_string(got) + ", expected " + std::to_string(want));
  }
  require_identical(*env.comm, buf.data(), buf.size(), what);
}

const RegisterScenario all_reduce_bits("all_reduce_bits", [](RankEnv& env) {
  int salt = 0;
  for (DataType type : {DataType::f32, DataType::bf16})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (size_t count : {size_t{1}, size_t{3}, size_t{7}, size_t{4099}, size_t{65537}, size_t{262147}})
        check(env, type, op, count, ++salt);
});

}  // namespace
}  // namespace dseek::comm::test
