// The CPU backend's side of two interface calls the CUDA backend also implements:
// memory_usage() counts live allocate() blocks and their peak, and
// attention_state_floats() is the size of what attention saves for backward: one
// logsumexp per score row and head (cpu_attention.cpp), as the CUDA backend saves.
#include <catch2/catch.hpp>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"

using dseek::backend::DeviceBuffer;

TEST_CASE("the CPU backend counts live allocations and their peak", "[backend][memory]") {
  auto cpu = dseek::backend::make_cpu_backend(1);
  const auto before = cpu->memory_usage();
  {
    DeviceBuffer<float> a(*cpu, 100);  // 400 bytes, rounded to 448 (64-byte lines)
    DeviceBuffer<float> b(*cpu, 16);   // 64 bytes
    CHECK(cpu->memory_usage().in_use_bytes == before.in_use_bytes + 448 + 64);
  }
  const auto after = cpu->memory_usage();
  CHECK(after.in_use_bytes == before.in_use_bytes);
  CHECK(after.peak_bytes == before.in_use_bytes + 448 + 64);
  DeviceBuffer<float> c(*cpu, 16);
  CHECK(cpu->memory_usage().peak_bytes == after.peak_bytes);  // below the peak: unchanged
}

TEST_CASE("the CPU backend saves the attention logsumexp, B*NH*T floats, not T x T",
          "[backend][attention]") {
  auto cpu = dseek::backend::make_cpu_backend(1);
  CHECK(cpu->attention_state_floats(3, 37, 48, 4) == size_t{3} * 4 * 37);
}
