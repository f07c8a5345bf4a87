// Implementation of safetensors.hpp.
#include "runtime/checkpoint/safetensors.hpp"

#include <string>

#include "runtime/checkpoint/file_ops.hpp"
#include "runtime/checkpoint/load.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::checkpoint {

uint64_t export_safetensors(const std::filesystem::path& checkpoint_dir,
                            const std::filesystem::path& output) {
  const Manifest manifest = verify(checkpoint_dir);
  const auto tensors = assemble(checkpoint_dir, manifest, Role::param);
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"step\":\"" +
                       std::to_string(manifest.step) + "\"}";
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    // Two appends: `"," + std::string` trips GCC 12's -Wrestrict false positive.
    header += ',';
    header += util::json_quote(t.name) + ":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d > 0) header += ',';
      header += std::to_string(t.shape[d]);
    }
    const uint64_t end = offset + t.values.size() * sizeof(float);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  // The format pads the header with spaces so the data starts 8-byte aligned.
  while (header.size() % 8 != 0) header += ' ';
  const std::filesystem::path temp = output.string() + ".tmp";
  {
    io::OutputFile file(temp);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header.size() >> (8 * i));
    file.write(length, sizeof length);
    file.write(header.data(), header.size());
    for (const auto& t : tensors) file.write(t.values.data(), t.values.size() * sizeof(float));
    file.sync_and_close();
  }
  io::rename_path(temp, output);
  return tensors.size();
}

}  // namespace dseek::checkpoint
