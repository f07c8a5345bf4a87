// `dseek devices`: prints the CUDA devices this build can use, or why there are none.
#include <cstdio>

#include "dseek/commands.hpp"
#include "gpu/device_info.hpp"

namespace dseek::tool {

namespace {

int run_devices(const Args& args) {
  if (!args.empty()) cli::unknown(args[0].rfind("-", 0) == 0 ? "option" : "argument", args[0], {"--help"});
  gpu::DeviceQuery query = gpu::query_devices();
  if (!query.error.empty()) {
    std::printf("no CUDA device: %s\n", query.error.c_str());
    return 0;
  }
  for (const auto& device : query.devices) {
    std::printf("cuda:%d %s sm_%d%d %.1f GiB %d SMs\n", device.index, device.name.c_str(),
                device.compute_major, device.compute_minor,
                static_cast<double>(device.memory_bytes) / (1u << 30), device.multiprocessors);
  }
  if (query.devices.empty()) std::printf("no CUDA device found\n");
  return 0;
}

}  // namespace

const Command& devices_command() {
  static const Command command{
      "devices", "  devices                        list the CUDA devices this build can use\n",
      "usage: dseek devices\n  the CUDA devices this build can use, or why there are none\n",
      run_devices};
  return command;
}

}  // namespace dseek::tool
