// libFuzzer target: the checkpoint manifest reader (checkpoint::read_manifest) on
// arbitrary bytes as a checkpoint's manifest.capnp: its Cap'n Proto parse, the layout and
// shard checks and the manifest checksum. A CheckpointError is the expected answer to bad
// input; anything else is a bug.
#include <cstdint>

#include "fuzz/fuzz_files.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = dseek::fuzz::scratch_dir();
  dseek::fuzz::write_input(dir / dseek::checkpoint::kManifestFile, data, size);
  try {
    const auto manifest = dseek::checkpoint::read_manifest(dir);
    // What a reader does next with a manifest it accepted.
    for (const auto& t : manifest.tensors) (void)t.full_count();
    (void)dseek::checkpoint::manifest_checksum(manifest);
  } catch (const dseek::checkpoint::CheckpointError&) {
  }
  return 0;
}
