// main() of dseek_gpu_tests. Without a usable CUDA device (query_devices() reports one
// or none is listed) the binary prints why and exits with 77, which ctest maps to
// "skipped" (SKIP_RETURN_CODE): on a machine without a GPU these tests show as not run,
// never as passed. Listing the tests (ctest's discovery at build time) needs no device.
// With a device, every kernel launch is followed by a synchronisation, so a faulting
// kernel is named by the error (gpu/cuda_check.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"

namespace {
constexpr int kSkipped = 77;

bool only_lists(const Catch::ConfigData& config) {
  return config.listTests || config.listTestNamesOnly || config.listTags ||
         config.listReporters || config.showHelp || config.libIdentify;
}
}  // namespace

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (int status = session.applyCommandLine(argc, argv); status != 0) return status;
  if (!only_lists(session.configData())) {
    const dseek::gpu::DeviceQuery query = dseek::gpu::query_devices();
    if (!query.error.empty() || query.devices.empty()) {
      std::printf("dseek_gpu_tests: SKIPPED, no usable CUDA device: %s\n",
                  query.error.empty() ? "the CUDA runtime lists no device" : query.error.c_str());
      return kSkipped;
    }
    dseek::gpu::synchronous_launch_checks().store(true);
  }
  return session.run();
}
