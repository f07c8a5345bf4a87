// HostWindow (runtime/backend/host_window.hpp): on the CPU backend the window is the
// range itself; on a device (the scrambled test device, whose memory reads wrong in
// place) it is a host copy that holds the range's values when read, goes back only by
// write_back() and only for windows that write, and reuses the caller's scratch.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "runtime/backend/device_buffer.hpp"
#include "runtime/backend/host_window.hpp"
#include "runtime/backend/scrambled_backend.hpp"
#include "support/random_values.hpp"

using dseek::backend::DeviceBuffer;
using dseek::backend::HostBuffer;
using dseek::backend::HostWindow;
using Access = HostWindow::Access;

namespace {
std::vector<float> read_back(dseek::backend::Backend& backend, const DeviceBuffer<float>& buffer) {
  std::vector<float> host(buffer.size());
  backend.copy_to_host(host.data(), buffer.data(), host.size() * sizeof(float));
  return host;
}
}  // namespace

TEST_CASE("host window: the range itself on the CPU backend", "[backend][host_window]") {
  auto cpu = dseek::backend::make_cpu_backend(1);
  DeviceBuffer<float> buffer(*cpu, 64);
  HostBuffer<float> scratch;
  HostWindow window(*cpu, buffer.data() + 8, 16, Access::update, scratch);
  CHECK(window.data() == buffer.data() + 8);
  CHECK(window.size() == 16);
  window.data()[0] = 3.0f;
  window.write_back();
  CHECK(buffer.data()[8] == 3.0f);
  CHECK(scratch.size() == 0);  // nothing staged
}

TEST_CASE("host window: a host copy of a device range, moved by the backend's calls",
          "[backend][host_window][scrambled]") {
  auto device = dseek::backend::make_scrambled_backend(1);
  const size_t n = 100;
  const auto values = dseek::testing::random_values(n, 11, 1.0f);
  DeviceBuffer<float> buffer(*device, n);
  device->copy_from_host(buffer.data(), values.data(), n * sizeof(float));
  HostBuffer<float> scratch;

  // update: reads the values, and its writes reach the device only by write_back().
  {
    HostWindow window(*device, buffer.data() + 10, 20, Access::update, scratch);
    REQUIRE(window.data() != buffer.data() + 10);
    CHECK(std::memcmp(window.data(), values.data() + 10, 20 * sizeof(float)) == 0);
    for (size_t i = 0; i < 20; ++i) window.data()[i] += 1.0f;
    CHECK(read_back(*device, buffer) == values);
    window.write_back();
  }
  std::vector<float> expected = values;
  for (size_t i = 10; i < 30; ++i) expected[i] += 1.0f;
  CHECK(read_back(*device, buffer) == expected);
  CHECK(scratch.size() == 20);

  // read: write_back() leaves the device alone; a larger window grows the scratch.
  {
    HostWindow window(*device, buffer.data(), n, Access::read, scratch);
    CHECK(std::memcmp(window.data(), expected.data(), n * sizeof(float)) == 0);
    window.data()[0] = -7.0f;
    window.write_back();
  }
  CHECK(read_back(*device, buffer) == expected);
  CHECK(scratch.size() == n);

  // overwrite: every value written goes back.
  {
    HostWindow window(*device, buffer.data(), n, Access::overwrite, scratch);
    for (size_t i = 0; i < n; ++i) window.data()[i] = static_cast<float>(i);
    window.write_back();
  }
  const auto overwritten = read_back(*device, buffer);
  for (size_t i = 0; i < n; ++i) CHECK(overwritten[i] == static_cast<float>(i));
}
