// Implementation of version.hpp; the values come from the header cmake/BuildInfo.cmake
// writes at build time.
#include "cli/version.hpp"

#include "dseek_build_info.hpp"

namespace dseek::cli {

std::string version_text(std::string_view program) {
  return std::string(program) + " " + DSEEK_BUILD_VERSION + " (commit " + DSEEK_BUILD_COMMIT +
         ", CUDA " + (std::string_view(DSEEK_BUILD_CUDA) == "ON" ? "on" : "off") + ")\n";
}

}  // namespace dseek::cli
