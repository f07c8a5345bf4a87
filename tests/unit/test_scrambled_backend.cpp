// The scrambled test device (runtime/backend/scrambled_backend.hpp): its memory does
// not hold the values in host form (a direct read is wrong), its memory calls move them
// faithfully, and its ops give the CPU backend's bits -- a whole GPT forward and backward
// and an AdamW step -- so that a training run on it matches the CPU run exactly when
// every access goes through the backend.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "runtime/backend/device_buffer.hpp"
#include "runtime/backend/scrambled_backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "support/random_values.hpp"
#include "support/small_gpt.hpp"

using dseek::backend::Backend;
using dseek::backend::DeviceBuffer;

namespace {
std::vector<float> to_host(Backend& backend, const float* device, size_t n) {
  std::vector<float> host(n);
  backend.copy_to_host(host.data(), device, n * sizeof(float));
  return host;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("scrambled backend memory: round trips exactly, reads wrong in place",
          "[backend][scrambled]") {
  auto scrambled = dseek::backend::make_scrambled_backend(1);
  CHECK(scrambled->name() == "scrambled-cpu-for-tests");
  CHECK_FALSE(scrambled->memory_is_host());
  CHECK(dseek::backend::make_cpu_backend(1)->memory_is_host());

  const auto values = dseek::testing::random_values(1000, 7, 1.0f);
  DeviceBuffer<float> buffer(*scrambled, values.size());
  // Fresh memory is zero-filled as the interface promises, but not zero in place.
  CHECK(same_bits(to_host(*scrambled, buffer.data(), 4), std::vector<float>(4, 0.0f)));
  CHECK(buffer.data()[0] != 0.0f);

  scrambled->copy_from_host(buffer.data(), values.data(), values.size() * sizeof(float));
  CHECK(same_bits(to_host(*scrambled, buffer.data(), values.size()), values));
  int in_place_equal = 0;
  for (size_t i = 0; i < values.size(); ++i) in_place_equal += buffer.data()[i] == values[i];
  CHECK(in_place_equal == 0);

  scrambled->zero(buffer.data() + 10, 5);
  const auto after_zero = to_host(*scrambled, buffer.data(), values.size());
  CHECK(after_zero[9] == values[9]);
  CHECK(after_zero[10] == 0.0f);
  CHECK(after_zero[14] == 0.0f);
  CHECK(after_zero[15] == values[15]);
  CHECK(scrambled->memory_usage().in_use_bytes >= values.size() * sizeof(float));
}

TEST_CASE("scrambled backend ops refuse host memory", "[backend][scrambled]") {
  auto scrambled = dseek::backend::make_scrambled_backend(1);
  std::vector<float> host(16, 1.0f);
  CHECK_THROWS_AS(scrambled->sum(host.data(), host.size()), std::logic_error);
}

TEST_CASE("scrambled backend gives the CPU backend's bits: GPT forward, backward, AdamW",
          "[backend][scrambled]") {
  const dseek::model::GptShape shape{32, 2, 4, 16, 64};
  const int64_t B = 2, T = 16;
  const auto batch = dseek::testing::random_batch(B, T, shape.vocab, 11);
  auto cpu = dseek::backend::make_cpu_backend(2);
  auto scrambled = dseek::backend::make_scrambled_backend(2);
  dseek::model::GptModel on_cpu(shape, {0, shape.layers}, *cpu, B);
  dseek::model::GptModel on_scrambled(shape, {0, shape.layers}, *scrambled, B);
  on_cpu.init_weights(5, 0.02);
  on_scrambled.init_weights(5, 0.02);
  const size_t n = on_cpu.num_params();

  const double cpu_loss = on_cpu.forward(batch.tokens.data(), batch.targets.data(), B, T);
  const double scrambled_loss =
      on_scrambled.forward(batch.tokens.data(), batch.targets.data(), B, T);
  CHECK(cpu_loss == scrambled_loss);
  CHECK(cpu_loss > 3.0);  // about ln(64) = 4.16 at init: a real loss, not garbage
  on_cpu.backward(1.0f / static_cast<float>(B * T));
  on_scrambled.backward(1.0f / static_cast<float>(B * T));
  const auto cpu_grads = to_host(*cpu, on_cpu.grads(), n);
  CHECK(same_bits(to_host(*scrambled, on_scrambled.grads(), n), cpu_grads));
  CHECK(cpu->sum_squares(on_cpu.grads(), n) == scrambled->sum_squares(on_scrambled.grads(), n));

  DeviceBuffer<float> m_cpu(*cpu, n), v_cpu(*cpu, n), m_scr(*scrambled, n), v_scr(*scrambled, n);
  for (int64_t step = 1; step <= 2; ++step) {
    cpu->adamw_update(on_cpu.params(), on_cpu.grads(), m_cpu.data(), v_cpu.data(), n, 1e-3f,
                      0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
    scrambled->adamw_update(on_scrambled.params(), on_scrambled.grads(), m_scr.data(),
                            v_scr.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
  }
  const auto cpu_params = to_host(*cpu, on_cpu.params(), n);
  CHECK(same_bits(to_host(*scrambled, on_scrambled.params(), n), cpu_params));
  CHECK(same_bits(to_host(*scrambled, v_scr.data(), n), to_host(*cpu, v_cpu.data(), n)));
  // The updated parameters moved: the comparison above is not of two untouched buffers.
  on_cpu.init_weights(5, 0.02);
  CHECK_FALSE(same_bits(to_host(*cpu, on_cpu.params(), n), cpu_params));
}
