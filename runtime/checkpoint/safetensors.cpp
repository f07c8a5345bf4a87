// Implementation of safetensors.hpp: the checkpoint's parameters, assembled and
// verified, through the one safetensors writer (runtime/export/safetensors_file.hpp).
#include "runtime/checkpoint/safetensors.hpp"

#include <cstring>
#include <string>

#include "runtime/checkpoint/file_ops.hpp"
#include "runtime/checkpoint/load.hpp"
#include "runtime/export/safetensors_file.hpp"

namespace dseek::checkpoint {

uint64_t export_safetensors(const std::filesystem::path& checkpoint_dir,
                            const std::filesystem::path& output) {
  const Manifest manifest = verify(checkpoint_dir);
  const auto tensors = assemble(checkpoint_dir, manifest, Role::param);
  std::vector<exporting::StoredTensor> stored;
  for (const auto& t : tensors) {
    exporting::StoredTensor s;
    s.name = t.name;
    s.shape = t.shape;
    s.bytes.resize(t.values.size() * sizeof(float));
    std::memcpy(s.bytes.data(), t.values.data(), s.bytes.size());
    stored.push_back(std::move(s));
  }
  const std::filesystem::path temp = output.string() + ".tmp";
  try {
    exporting::write_safetensors(temp, stored,
                                 {{"format", "pt"}, {"step", std::to_string(manifest.step)}});
    io::rename_path(temp, output);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
  return tensors.size();
}

}  // namespace dseek::checkpoint
