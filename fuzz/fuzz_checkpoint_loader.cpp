// libFuzzer target: the checkpoint loader (checkpoint::load) on a checkpoint folder made
// from the input (fuzz_files.hpp's bundle: COMMITTED, manifest.capnp, params.bin,
// adam_m.bin, adam_v.bin, as `dseek ckpt import` writes them for fuzz/make_seeds.py's
// tiny GPT-2): the manifest, each file's size and checksums, the slices assembled into
// tensors and placed into the reader's layout. A CheckpointError is the expected answer
// to bad input; anything else is a bug.
#include <cstdint>

#include "fuzz/fuzz_files.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/load.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The shape of fuzz/make_seeds.py's model.
  static const dseek::model::ParamLayout layout(
      dseek::model::GptShape{.dim = 4, .layers = 1, .heads = 2, .context = 4, .vocab = 8});
  dseek::fuzz::write_files(dseek::fuzz::unbundle(data, size));
  try {
    (void)dseek::checkpoint::load(dseek::fuzz::scratch_dir(), layout);
  } catch (const dseek::checkpoint::CheckpointError&) {
  }
  return 0;
}
