// AdamW with a given second moment (AdamWSettings::given_second_moment_after, used with
// compressed gradients) and the replica-local estimate that gives it
// (optim::LocalSecondMoment): the first steps are standard AdamW bit for bit; afterwards
// v is what set_second_moment() gave and the gradients do not change it, and the update
// matches the formula in double precision; a step that needs a given v refuses to run
// without one; the local estimate is the bias-corrected running average of squares, and
// averaging two replicas' buffers (values and mass) gives the estimate of both.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/optim/adamw.hpp"
#include "support/random_values.hpp"
#include "runtime/optim/local_second_moment.hpp"

using dseek::model::GptShape;
using dseek::model::ParamLayout;
using dseek::optim::AdamW;
using dseek::optim::AdamWSettings;
using dseek::testing::random_values;
using dseek::optim::LocalSecondMoment;

namespace {
const GptShape kShape{.dim = 16, .layers = 1, .heads = 2, .context = 8, .vocab = 32};

}  // namespace

TEST_CASE("AdamW with a given second moment: standard first, then v fixed", "[optim][compression]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  const ParamLayout layout(kShape);
  const size_t n = layout.total();
  AdamWSettings standard_settings{0.9, 0.95, 1e-8, 0.1, 0.0};  // no clipping: the formula below
  AdamWSettings given_settings = standard_settings;
  given_settings.given_second_moment_after = 2;
  AdamW standard(*backend, layout, standard_settings);
  AdamW given(*backend, layout, given_settings);
  std::vector<float> p_standard = random_values(n, 1, 0.05f), p_given = p_standard;
  const double lr = 1e-2;

  // Steps 1 and 2: the same arithmetic as standard AdamW.
  for (uint32_t step = 1; step <= 2; ++step) {
    const auto g = random_values(n, 10 + step, 0.1f);
    standard.step(p_standard.data(), g.data(), lr);
    given.step(p_given.data(), g.data(), lr);
    CHECK_FALSE(given.uses_given_second_moment());
  }
  CHECK(std::memcmp(p_standard.data(), p_given.data(), n * sizeof(float)) == 0);

  // Step 3 needs a given v.
  const auto g3 = random_values(n, 13, 0.1f);
  {
    AdamW fresh(*backend, layout, given_settings);
    fresh.set_steps_taken(2);
    std::vector<float> untouched = p_given;
    CHECK_THROWS_AS(fresh.step(untouched.data(), g3.data(), lr), std::logic_error);
  }
  // Well away from zero, so that float32 against double measures the arithmetic.
  std::vector<float> v_given(n);
  for (size_t i = 0; i < n; ++i) v_given[i] = 1e-4f * (1.0f + 0.5f * std::sin(static_cast<float>(i)));
  given.set_second_moment(v_given.data());

  std::vector<double> m(n), p(n);
  {
    std::vector<float> m_host(n), v_host(n);
    given.moments_to_host(m_host.data(), v_host.data());
    for (size_t i = 0; i < n; ++i) m[i] = m_host[i], p[i] = p_given[i];
  }
  std::vector<bool> decays(n, false);
  for (const auto& tensor : layout.tensors())
    for (size_t i = tensor.offset; i < tensor.offset + tensor.size(); ++i) decays[i] = tensor.decay;
  for (int step = 3; step <= 5; ++step) {
    const auto g = random_values(n, 10 + static_cast<uint32_t>(step), 0.1f);
    given.step(p_given.data(), g.data(), lr);
    CHECK(given.uses_given_second_moment());
    const double step_size = lr / (1.0 - std::pow(0.9, step));
    for (size_t i = 0; i < n; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      const double decay = decays[i] ? 1.0 - lr * 0.1 : 1.0;
      p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(static_cast<double>(v_given[i])) + 1e-8);
    }
  }
  std::vector<float> m_host(n), v_host(n);
  given.moments_to_host(m_host.data(), v_host.data());
  CHECK(std::memcmp(v_host.data(), v_given.data(), n * sizeof(float)) == 0);  // untouched by gradients
  double worst = 0.0;
  // float32 against double over three steps, relative to the size of a parameter or of a
  // step (lr), whichever is larger: ~1e-6 measured.
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(p_given[i] - p[i]) / (std::abs(p[i]) + lr));
  CHECK(worst < 1e-5);
}

TEST_CASE("LocalSecondMoment is the bias-corrected running average of squares", "[optim][compression]") {
  const size_t n = 37;
  const double beta2 = 0.95;
  LocalSecondMoment a(n, beta2), b(n, beta2);
  std::vector<double> va(n, 0.0), vb(n, 0.0);
  double mass = 0.0;
  for (uint32_t step = 0; step < 5; ++step) {
    const auto ga = random_values(n, 100 + step, 1.0f), gb = random_values(n, 200 + step, 1.0f);
    // Two ranges, as the buckets of a step arrive.
    a.add(0, ga.data(), 20, 2.0f);
    a.add(20, ga.data() + 20, n - 20, 2.0f);
    b.add(0, gb.data(), n, 2.0f);
    a.end_step();
    b.end_step();
    mass = beta2 * mass + (1.0 - beta2);
    for (size_t i = 0; i < n; ++i) {
      va[i] = beta2 * va[i] + (1.0 - beta2) * 4.0 * ga[i] * ga[i];
      vb[i] = beta2 * vb[i] + (1.0 - beta2) * 4.0 * gb[i] * gb[i];
    }
  }
  CHECK(a.mass() == Approx(1.0 - std::pow(beta2, 5)).epsilon(1e-6));
  std::vector<float> corrected(n);
  a.corrected(corrected.data());
  for (size_t i = 0; i < n; ++i) CHECK(corrected[i] == Approx(va[i] / mass).epsilon(1e-5));

  // Averaging the buffers (as the replicas do, mass included) averages the estimates.
  for (size_t i = 0; i < a.size_with_mass(); ++i) a.data()[i] = 0.5f * (a.data()[i] + b.data()[i]);
  a.corrected(corrected.data());
  for (size_t i = 0; i < n; ++i) CHECK(corrected[i] == Approx(0.5 * (va[i] + vb[i]) / mass).epsilon(1e-5));

  CHECK_THROWS_AS(a.add(30, corrected.data(), 8, 1.0f), std::out_of_range);
  CHECK_THROWS_AS(LocalSecondMoment(4, 1.0), std::invalid_argument);
}
