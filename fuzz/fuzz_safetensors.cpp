// libFuzzer target: the safetensors reader (exporting::read_safetensors) on arbitrary
// bytes as a .safetensors file: the header length, the JSON header, dtypes, shapes and
// data offsets, then to_floats on every tensor it accepted. A CheckpointError is the
// expected answer to bad input; anything else (a crash, a huge allocation) is a bug.
#include <cstdint>

#include "fuzz/fuzz_files.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/export/safetensors_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = dseek::fuzz::scratch_dir() / "model.safetensors";
  dseek::fuzz::write_input(file, data, size);
  try {
    for (const auto& tensor : dseek::exporting::read_safetensors(file))
      (void)dseek::exporting::to_floats(tensor);
  } catch (const dseek::checkpoint::CheckpointError&) {
  }
  return 0;
}
