// The CUDA backend's device memory: one pool per backend, allocations zero-filled,
// freed blocks reused, usage and peak reported by memory_usage(); and the refusals of
// make_cuda_backend for a device index that does not exist, naming what exists; and
// the format of the CUDA error checks, which clear the error they report; and the CPU
// offload's host side: host_memory() is pinned and zero-filled, and copy_from_host_async
// (a copy stream) lands before the ops queued after it read the memory.
#include <catch2/catch.hpp>

#include <vector>

#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "tests/gpu/parity_support.hpp"

using namespace dseek::gpu_testing;

TEST_CASE("allocations are zero-filled and counted in memory_usage", "[gpu][memory]") {
  auto gpu = dseek::gpu::make_cuda_backend(0);
  const auto before = gpu->memory_usage();
  {
    DeviceBuffer<float> a(*gpu, 1000);
    DeviceBuffer<float> b(*gpu, 3);
    std::vector<float> host(1000, 1.0f);
    gpu->copy_to_host(host.data(), a.data(), host.size() * sizeof(float));
    for (float value : host) REQUIRE(value == 0.0f);
    const auto during = gpu->memory_usage();
    CHECK(during.in_use_bytes >= before.in_use_bytes + 1000 * sizeof(float) + 3 * sizeof(float));
    CHECK(during.peak_bytes >= during.in_use_bytes);
  }
  const auto after = gpu->memory_usage();
  CHECK(after.in_use_bytes == before.in_use_bytes);
  CHECK(after.peak_bytes >= before.in_use_bytes + 1003 * sizeof(float));
}

TEST_CASE("a released block is reused, and reused memory is zero-filled again", "[gpu][memory]") {
  auto gpu = dseek::gpu::make_cuda_backend(0);
  void* first = nullptr;
  {
    DeviceBuffer<float> a(*gpu, 4096);
    first = a.data();
    const std::vector<float> ones(4096, 1.0f);
    gpu->copy_from_host(a.data(), ones.data(), ones.size() * sizeof(float));
  }
  DeviceBuffer<float> b(*gpu, 4096);
  CHECK(static_cast<void*>(b.data()) == first);  // best fit: the same block
  std::vector<float> host(4096, 1.0f);
  gpu->copy_to_host(host.data(), b.data(), host.size() * sizeof(float));
  for (float value : host) REQUIRE(value == 0.0f);
}

TEST_CASE("host memory is pinned and an async copy lands before the next op reads it",
          "[gpu][memory][offload]") {
  auto gpu = dseek::gpu::make_cuda_backend(0);
  auto memory = gpu->host_memory();
  REQUIRE(memory->pinned());
  constexpr size_t n = size_t{1} << 22;  // 16 MiB: long enough for the copy to be in flight
  dseek::backend::HostBuffer<float> host(memory, n);
  REQUIRE(host.pinned());
  for (size_t i = 0; i < n; ++i) REQUIRE(host.data()[i] == 0.0f);
  for (size_t i = 0; i < n; ++i) host.data()[i] = static_cast<float>(i % 1000) * 0.5f;
  DeviceBuffer<float> a(*gpu, n);
  gpu->copy_from_host_async(a.data(), host.data(), n * sizeof(float));
  // The next op on the compute stream (a reduction, which returns to the host) waits for
  // the copy's event: it sees every element.
  double expected = 0.0;
  for (size_t i = 0; i < n; ++i) expected += static_cast<double>(host.data()[i]);
  CHECK(gpu->sum(a.data(), n) == Approx(expected).epsilon(1e-9));
  gpu->finish_copies();
  std::vector<float> back(n, -1.0f);
  gpu->copy_to_host(back.data(), a.data(), n * sizeof(float));
  for (size_t i = 0; i < n; ++i) REQUIRE(back[i] == host.data()[i]);
}

TEST_CASE("make_cuda_backend refuses a device index that does not exist", "[gpu][errors]") {
  const auto query = dseek::gpu::query_devices();
  const int count = static_cast<int>(query.devices.size());
  CHECK_THROWS_WITH(dseek::gpu::make_cuda_backend(count), Catch::Contains("CUDA device(s)"));
  CHECK_THROWS_WITH(dseek::gpu::make_cuda_backend(-1), Catch::Contains("CUDA device(s)"));
}

TEST_CASE("errors name the device", "[gpu][errors]") {
  auto gpu = dseek::gpu::make_cuda_backend(0);
  const std::string name = dseek::gpu::query_devices().devices.at(0).name;
  DeviceBuffer<float> scratch(*gpu, 16);
  CHECK_THROWS_WITH(gpu->attention_forward(scratch.data(), scratch.data(), scratch.data(), 1, 1,
                                           512, 1, dseek::backend::MatmulFormat::fp32),
                    Catch::Contains("CUDA device 0 (" + name + ")"));
}

TEST_CASE("DSEEK_CUDA_CHECK names the file, line, error and call", "[gpu][errors]") {
  try {
    DSEEK_CUDA_CHECK(cudaSetDevice(-1));
    FAIL("cudaSetDevice(-1) did not fail");
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    INFO(what);
    CHECK_THAT(what, Catch::Contains("test_device_memory.cpp:") &&
                         Catch::Contains(": cudaError") &&
                         Catch::Contains("in `cudaSetDevice(-1)`"));
  }
  // The reported error is cleared: a later launch check on this thread must not see it
  // and blame its kernel.
  auto gpu = dseek::gpu::make_cuda_backend(0);
  DeviceBuffer<float> x(*gpu, 16);
  CHECK_NOTHROW(gpu->gelu_forward(x.data(), x.data(), 16));
  CHECK(cudaGetLastError() == cudaSuccess);
}
