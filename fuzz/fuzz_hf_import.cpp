// libFuzzer target: the Hugging Face GPT-2 importer (exporting::import_hf_gpt2) on a
// folder made from the input (fuzz_files.hpp's bundle: config.json, model.safetensors):
// the config's keys and sizes, every tensor's name and shape against them, the tied head.
// A CheckpointError is the expected answer to bad input; anything else is a bug.
#include <cstdint>

#include "fuzz/fuzz_files.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/export/hf_gpt2.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dseek::fuzz::write_files(dseek::fuzz::unbundle(data, size));
  try {
    (void)dseek::exporting::import_hf_gpt2(dseek::fuzz::scratch_dir());
  } catch (const dseek::checkpoint::CheckpointError&) {
  }
  return 0;
}
