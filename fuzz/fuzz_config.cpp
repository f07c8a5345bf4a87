// libFuzzer target: the job config loader and validation (config::load_config_text, which
// parses the TOML, checks every key and value against the key table and then validate()'s
// relations) on arbitrary text. A ConfigError is the expected answer to bad input;
// anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstdint>
#include <string_view>

#include "runtime/config/load.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto config = dseek::config::load_config_text(text, "fuzz.toml");
    (void)config;
  } catch (const dseek::config::ConfigError&) {
  }
  return 0;
}
