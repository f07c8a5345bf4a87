// Export of a checkpoint's parameters as a .safetensors file (the Hugging Face format
// that PyTorch, JAX and llama.cpp tools read): an 8-byte little-endian header length,
// a JSON header {name: {"dtype":"F32","shape":[...],"data_offsets":[begin,end]}}, then
// the tensors' bytes. Parameters only; the optimizer state is not a model.
#pragma once

#include <cstdint>
#include <filesystem>

namespace dseek::checkpoint {

// Verifies the checkpoint, writes `output` (atomically: temp file, fsync, rename).
// Returns the number of tensors written. Throws CheckpointError.
uint64_t export_safetensors(const std::filesystem::path& checkpoint_dir,
                            const std::filesystem::path& output);

}  // namespace dseek::checkpoint
