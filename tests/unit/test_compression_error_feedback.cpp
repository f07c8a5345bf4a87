// Gradient compression: error feedback (comm/compression/error_feedback.hpp), and a hidden
// throughput benchmark of every codec: dseek_unit_tests "[.compression-bench]".
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "comm/compression/compression.hpp"

namespace cc = dseek::comm::compression;

namespace {

// sum_raw - sum_decoded per coordinate, in double, and its largest magnitude.
struct Drift {
  std::vector<double> sum_raw, sum_decoded;
  explicit Drift(size_t n) : sum_raw(n, 0.0), sum_decoded(n, 0.0) {}
  double max_abs() const {
    double m = 0.0;
    for (size_t i = 0; i < sum_raw.size(); ++i) m = std::max(m, std::fabs(sum_raw[i] - sum_decoded[i]));
    return m;
  }
};

struct Run {
  std::vector<double> drift;  // max |sum_raw - sum_decoded| after each step
  double identity_error = 0;  // max over steps of |sum_raw - sum_decoded - residual| / tolerance
};

// 200 steps of gradients with a fixed non-zero mean per coordinate plus unit noise: a
// codec that drops or rounds consistently loses a share of the mean at every step.
Run run(const char* codec_name, bool feedback, size_t n = 2000, int steps = 200) {
  std::mt19937 rng(42);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::uniform_real_distribution<float> mean_dist(-0.5f, 0.5f);
  std::vector<float> mean(n);
  for (auto& m : mean) m = mean_dist(rng);

  std::shared_ptr<cc::Codec> codec = cc::make_codec(codec_name, 0.05, 64);
  cc::ErrorFeedback ef(codec);
  std::vector<std::byte> msg(codec->max_encoded_bytes(n));
  std::vector<float> g(n), decoded(n);
  Drift d(n);
  Run r;
  double max_g = 0;
  for (int step = 1; step <= steps; ++step) {
    for (size_t i = 0; i < n; ++i) {
      g[i] = mean[i] + noise(rng);
      d.sum_raw[i] += g[i];
    }
    const size_t bytes = feedback ? ef.encode(g.data(), n, msg.data()) : codec->encode(g.data(), n, msg.data());
    std::fill(decoded.begin(), decoded.end(), 0.0f);
    codec->decode_add(msg.data(), bytes, decoded.data(), n);
    for (size_t i = 0; i < n; ++i) d.sum_decoded[i] += decoded[i];
    r.drift.push_back(d.max_abs());
    if (feedback) {
      // sum(decoded) = sum(raw) - residual exactly in real arithmetic. In float, each step
      // rounds g + residual and residual - decoded once each (<= 2 ulps of |g'|), so the
      // tolerance is steps * 2 * 2^-23 * max|g'|, with max|g'| <= max|g| + max|residual|.
      double max_res = 0;
      for (size_t i = 0; i < n; ++i) {
        max_res = std::max(max_res, static_cast<double>(std::fabs(ef.residual()[i])));
        max_g = std::max(max_g, static_cast<double>(std::fabs(g[i])));
      }
      const double tol = step * 2.0 * 0x1p-23 * (max_g + max_res) + 1e-9;
      for (size_t i = 0; i < n; ++i) {
        const double err = std::fabs(d.sum_raw[i] - d.sum_decoded[i] - ef.residual()[i]);
        r.identity_error = std::max(r.identity_error, err / tol);
      }
    }
  }
  return r;
}

}  // namespace

TEST_CASE("error feedback: the decoded sum tracks the raw sum up to the residual", "[compression][feedback]") {
  for (const char* name : {"topk", "topk+int8", "int8", "none"}) {
    INFO(name);
    const Run with = run(name, true);
    CHECK(with.identity_error <= 1.0);  // ||sum_raw - sum_decoded - residual|| within float rounding
    // Bounded: the drift does not keep growing (the last 100 steps stay within 1.5x the
    // worst of the first 100).
    const double first_half = *std::max_element(with.drift.begin(), with.drift.begin() + 100);
    const double second_half = *std::max_element(with.drift.begin() + 100, with.drift.end());
    INFO("drift first 100 steps " << first_half << ", last 100 " << second_half);
    CHECK(second_half <= 1.5 * first_half + 1e-6);
  }
}

TEST_CASE("without error feedback top-k drifts away from the raw sum", "[compression][feedback]") {
  for (const char* name : {"topk", "topk+int8"}) {
    INFO(name);
    const Run with = run(name, true);
    const Run without = run(name, false);
    INFO("drift at 100 / 200 steps: with " << with.drift[99] << " / " << with.drift[199] << ", without "
                                           << without.drift[99] << " / " << without.drift[199]);
    CHECK(without.drift[199] >= 1.6 * without.drift[99]);  // grows ~linearly with the steps
    CHECK(without.drift[199] >= 5.0 * with.drift[199]);
  }
}

TEST_CASE("error feedback keeps exactly the dropped part for top-k", "[compression][feedback]") {
  auto codec = std::make_shared<cc::TopK>(0.25);  // k = 1 of 4
  cc::ErrorFeedback ef(codec);
  std::vector<std::byte> msg(ef.max_encoded_bytes(4));
  const std::vector<float> g = {1.0f, -3.0f, 2.0f, 0.5f};
  ef.encode(g.data(), 4, msg.data());
  CHECK(std::vector<float>(ef.residual().begin(), ef.residual().end()) == std::vector<float>{1.0f, 0.0f, 2.0f, 0.5f});
  ef.encode(g.data(), 4, msg.data());  // g' = {2, -3, 4, 1}: sends 4 at index 2
  std::vector<float> dec(4, 0.0f);
  codec->decode_add(msg.data(), msg.size(), dec.data(), 4);
  CHECK(dec == std::vector<float>{0.0f, 0.0f, 4.0f, 0.0f});
  CHECK(std::vector<float>(ef.residual().begin(), ef.residual().end()) == std::vector<float>{2.0f, -3.0f, 0.0f, 1.0f});
  // ErrorFeedback's own decode of its message is not counted as received.
  CHECK(codec->sent().messages == 2);
  CHECK(codec->received().messages == 1);
  ef.scale_residual(0.5f);
  CHECK(ef.residual()[1] == -1.5f);
  ef.reset();
  CHECK(ef.residual()[1] == 0.0f);
}

TEST_CASE("error feedback rejects a changed size and recovers from non-finite steps", "[compression][feedback]") {
  cc::ErrorFeedback ef(cc::make_codec("int8", 0.05, 4));
  std::vector<std::byte> msg(ef.max_encoded_bytes(8));
  std::vector<float> g = {1, 2, 3, 4, 5, 6, 7, 8.5f};
  ef.encode(g.data(), 8, msg.data());
  CHECK_THROWS_WITH(ef.encode(g.data(), 7, msg.data()), Catch::Matchers::Contains("had 8 elements and now has 7"));
  g[1] = std::numeric_limits<float>::quiet_NaN();
  ef.encode(g.data(), 8, msg.data());
  for (float r : ef.residual()) CHECK(std::isfinite(r));  // the poisoned block is reset
  CHECK(ef.residual()[0] == 0.0f);
  CHECK(ef.residual()[4] != 0.0f);  // the finite block keeps its rounding error
  CHECK_THROWS_AS(cc::ErrorFeedback(nullptr), std::invalid_argument);
}

TEST_CASE("error feedback on empty and tiny tensors", "[compression][feedback]") {
  for (const char* name : {"none", "topk", "int8", "topk+int8"}) {
    for (size_t n : {0u, 1u, 3u}) {
      INFO(name << " n=" << n);
      cc::ErrorFeedback ef(cc::make_codec(name));
      std::vector<std::byte> msg(ef.max_encoded_bytes(n));
      std::vector<float> g = {0.3f, -0.7f, 0.1f};
      g.resize(n);
      for (int step = 0; step < 3; ++step) CHECK(ef.encode(g.data(), n, msg.data()) == msg.size());
      CHECK(ef.residual().size() == n);
    }
  }
}

// Throughput of encode and decode_add on 16M floats, in GB/s of raw fp32 gradient.
// Hidden: run it with  dseek_unit_tests "[.compression-bench]"
TEST_CASE("codec throughput on 16M floats", "[.compression-bench]") {
  const size_t n = size_t{16} << 20;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n), acc(n, 0.0f);
  for (auto& v : g) v = normal(rng);
  using clock = std::chrono::steady_clock;
  auto gbps = [&](auto&& fn) {
    fn();  // warm-up: first-touch scratch
    const int reps = 5;
    const auto t0 = clock::now();
    for (int r = 0; r < reps; ++r) fn();
    const double s = std::chrono::duration<double>(clock::now() - t0).count() / reps;
    return static_cast<double>(n) * 4.0 / s / 1e9;
  };
  for (const char* name : {"none", "int8", "topk", "topk+int8"}) {
    std::shared_ptr<cc::Codec> codec = cc::make_codec(name, 0.05);
    std::vector<std::byte> msg(codec->max_encoded_bytes(n));
    size_t bytes = 0;
    const double enc = gbps([&] { bytes = codec->encode(g.data(), n, msg.data()); });
    const double dec = gbps([&] { codec->decode_add(msg.data(), bytes, acc.data(), n); });
    cc::ErrorFeedback ef(codec);
    const double ef_enc = gbps([&] { ef.encode(g.data(), n, msg.data()); });
    std::printf("%-10s encode %6.2f GB/s  decode_add %6.2f GB/s  EF encode %6.2f GB/s  (%.1f%% of raw bytes)\n",
                name, enc, dec, ef_enc, 100.0 * static_cast<double>(bytes) / (4.0 * static_cast<double>(n)));
  }
  SUCCEED();
}
