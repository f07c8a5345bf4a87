// AdamW with a given second moment (AdamWSettings::given_second_moment_after, used with
// compressed gradients) and the replica-local estimate that gives it
// (optim::LocalSecondMoment): the first steps are standard AdamW bit for bit; afterwards
// v is what set_second_moment() gave and the gradients do not change it, and the update
// matches the formula in double precision; a step that needs a given v refuses to run
// without one; the local estimate is the bias-corrected running average of squares, and
// averaging two replicas' buffers (values and mass) gives the estimate of both; the
// estimate for the mean of N replicas' gradients divides the local noise by N; a tensor's
// update with a given v is capped at an RMS of given_update_rms.
#include <catch2/catch.hpp>

#include <algorithm>
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
  given_settings.given_update_rms = 0.0;  // uncapped: the formula below (the cap: next test)
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

// Against double: per tensor, the update with the cap is the uncapped update scaled to an
// RMS of given_update_rms where it exceeds it, and left alone where it does not.
TEST_CASE("AdamW with a given second moment caps each tensor's update RMS", "[optim][compression]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  const ParamLayout layout(kShape);
  const size_t n = layout.total();
  AdamWSettings settings{0.9, 0.95, 1e-8, 0.0, 0.0};
  settings.given_second_moment_after = 0;
  settings.given_update_rms = 1.0;
  AdamW given(*backend, layout, settings);
  // v small against g^2 in the first tensor (an update RMS ~10: capped), large elsewhere
  // (RMS ~0.1: untouched).
  const auto& first = layout.tensors().front();
  std::vector<float> v(n), p0 = random_values(n, 7, 0.05f), p = p0;
  for (size_t i = 0; i < n; ++i) v[i] = i < first.offset + first.size() ? 1e-4f : 1.0f;
  given.set_second_moment(v.data());
  const auto g = random_values(n, 8, 0.1f);
  const double lr = 1e-2;
  given.step(p.data(), g.data(), lr);
  // Step 1: m = 0.1 g, bias-corrected m = g; update u = g / (sqrt(v) + eps).
  for (const auto& tensor : layout.tensors()) {
    double squares = 0.0;
    for (size_t i = tensor.offset; i < tensor.offset + tensor.size(); ++i) {
      const double u = g[i] / (std::sqrt(static_cast<double>(v[i])) + 1e-8);
      squares += u * u;
    }
    const double rms = std::sqrt(squares / static_cast<double>(tensor.size()));
    const double scale = rms > 1.0 ? 1.0 / rms : 1.0;
    if (tensor.offset == first.offset) CHECK(rms > 2.0);  // the cap is exercised
    double worst = 0.0;
    for (size_t i = tensor.offset; i < tensor.offset + tensor.size(); ++i) {
      const double expected = p0[i] - lr * scale * g[i] / (std::sqrt(static_cast<double>(v[i])) + 1e-8);
      worst = std::max(worst, std::abs(p[i] - expected) / (std::abs(expected) + lr));
    }
    INFO("tensor at " << tensor.offset << ": update RMS " << rms);
    CHECK(worst < 1e-5);  // float32 against double, one step
  }
}

// Two replicas whose local gradients are a shared mean plus independent noise: the
// estimate for their mean is mu^2 + (v - mu^2) / N per replica (double reference), and
// with enough steps it approaches the second moment of the mean gradient, not of one
// replica's (which has twice the noise).
TEST_CASE("LocalSecondMoment estimates the second moment of the replicas' mean gradient", "[optim][compression]") {
  const size_t n = 64;
  const double beta2 = 0.95;
  const int replicas = 2;
  LocalSecondMoment local(n, beta2);
  std::vector<double> v(n, 0.0), mu(n, 0.0);
  double mass = 0.0;
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> grad(n);
  const int steps = 400;
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < n; ++i) grad[i] = (i % 2 == 0 ? 0.5f : -1.0f) + noise(rng);  // mean, noise 1
    local.add(0, grad.data(), n, 1.0f);
    local.end_step();
    mass = beta2 * mass + (1.0 - beta2);
    for (size_t i = 0; i < n; ++i) {
      v[i] = beta2 * v[i] + (1.0 - beta2) * grad[i] * grad[i];
      mu[i] = beta2 * mu[i] + (1.0 - beta2) * grad[i];
    }
  }
  std::vector<float> estimate(n + 1);
  local.mean_gradient_estimate(estimate.data(), replicas);
  CHECK(estimate[n] == Approx(mass).epsilon(1e-5));
  double mean_ratio = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double mu_c = mu[i] / mass, v_c = v[i] / mass;
    const double expected = mass * (mu_c * mu_c + std::max(v_c - mu_c * mu_c, 0.0) / replicas);
    CHECK(estimate[i] == Approx(expected).epsilon(1e-4));
    // The mean of 2 replicas' gradients: mean^2 + 1/2 (noise variance 1 halved).
    const double truth = (i % 2 == 0 ? 0.25 : 1.0) + 0.5;
    mean_ratio += estimate[i] / mass / truth / static_cast<double>(n);
  }
  // The running averages over ~20 steps are noisy per element; their mean over 64
  // elements is within ~15% of the truth (a single replica's v: ~1.5-2x too large).
  CHECK(mean_ratio == Approx(1.0).epsilon(0.15));
  CHECK_THROWS_AS(local.mean_gradient_estimate(estimate.data(), 0), std::invalid_argument);
}
