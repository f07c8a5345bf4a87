// FP8 delayed scaling (runtime/numerics/delayed_scaling.hpp) and its per-operand table in
// the model's precision policy (runtime/model/precision_policy.hpp): the scale of step s
// is fp8_max / max(amax of steps s-H .. s-1) / 2^margin, starting at 1, unchanged while
// the history is empty or zero, ignoring non-finite amaxes; the CPU backend's FP8 matmul
// raises each operand's amax, and end_step() turns them into the next step's scales.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/model/precision_policy.hpp"
#include "runtime/numerics/delayed_scaling.hpp"
#include "support/random_values.hpp"

using namespace dseek;
using numerics::DelayedScaling;
using numerics::Fp8Format;

TEST_CASE("delayed scaling: the scale comes from the earlier steps' amax history",
          "[unit][numerics]") {
  DelayedScaling s(Fp8Format::e4m3, {3, 0});
  CHECK(s.scale() == 1.0f);  // nothing recorded yet
  s.end_step();              // a step that recorded nothing: history all zero
  CHECK(s.scale() == 1.0f);
  s.record(2.0f);
  s.record(8.0f);  // two uses in one step: their max
  CHECK(s.scale() == 1.0f);  // the current step's amax is not used by the current step
  s.end_step();
  CHECK(s.scale() == Approx(448.0 / 8.0).epsilon(1e-7));
  s.record(1.0f);
  s.end_step();
  s.record(1.0f);
  s.end_step();  // history {8, 1, 1}
  CHECK(s.scale() == Approx(448.0 / 8.0).epsilon(1e-7));
  s.record(0.5f);
  s.end_step();  // 8 left the window of 3: {1, 1, 0.5}
  CHECK(s.history_max() == 1.0f);
  CHECK(s.scale() == Approx(448.0).epsilon(1e-7));
  // A non-finite amax (an overflowed step) is not recorded: the 1s age out normally.
  s.record(std::numeric_limits<float>::infinity());
  s.end_step();
  CHECK(s.history_max() == 1.0f);
  CHECK(std::isfinite(s.scale()));
}

TEST_CASE("delayed scaling: margin, E5M2 range and tiny amaxes", "[unit][numerics]") {
  DelayedScaling margin(Fp8Format::e5m2, {16, 2});
  margin.record(3.5f);
  margin.end_step();
  CHECK(margin.scale() == Approx(57344.0 / 3.5 / 4.0).epsilon(1e-7));
  DelayedScaling tiny(Fp8Format::e4m3, {4, 0});
  tiny.record(1e-44f);  // 448 / 1e-44 is beyond fp32: clamped, never Inf
  tiny.end_step();
  CHECK(tiny.scale() == std::numeric_limits<float>::max());
  CHECK_THROWS_WITH(DelayedScaling(Fp8Format::e4m3, {0, 0}),
                    Catch::Matchers::Contains("train.fp8_amax_history"));
}

TEST_CASE("delayed scaling: FP8 matmuls raise the amaxes, end_step sets the next scales",
          "[unit][numerics]") {
  auto backend = backend::make_cpu_backend(2);
  model::PrecisionPolicy policy(*backend, backend::MatmulFormat::fp8, 2, {4, 0});
  const int N = 64, C = 32, OC = 48;
  auto inp = testing::random_values(static_cast<size_t>(N) * C, 1, 1.0f);
  auto w = testing::random_values(static_cast<size_t>(OC) * C, 2, 0.02f);
  auto dout = testing::random_values(static_cast<size_t>(N) * OC, 3, 1e-3f);
  inp[5] = -9.25f;  // beyond every N(0, 1) draw here
  w[7] = 0.5f;
  dout[11] = -0.125f;
  std::vector<float> out(static_cast<size_t>(N) * OC), dinp(inp.size()), dw(w.size());
  const auto p = policy.block(1, model::PrecisionPolicy::kMlpUp);
  CHECK(p.format == backend::MatmulFormat::fp8);
  backend->mixed_matmul_forward(out.data(), inp.data(), w.data(), nullptr, N, C, OC, p);
  backend->mixed_matmul_backward(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(),
                                 w.data(), N, C, OC, p);
  CHECK(*p.inp.amax == 9.25f);
  CHECK(*p.weight.amax == 0.5f);
  CHECK(*p.dout.amax == 0.125f);
  policy.end_step();
  const auto after = policy.block(1, model::PrecisionPolicy::kMlpUp);
  CHECK(*after.inp.scale == Approx(448.0 / 9.25).epsilon(1e-7));
  CHECK(*after.weight.scale == Approx(448.0 / 0.5).epsilon(1e-7));
  CHECK(*after.dout.scale == Approx(57344.0 / 0.125).epsilon(1e-7));
  CHECK(*after.inp.amax == 0.0f);  // a new step starts
  // Other matmuls were not used: their scales stay 1.
  CHECK(*policy.block(0, model::PrecisionPolicy::kQkv).inp.scale == 1.0f);
}
