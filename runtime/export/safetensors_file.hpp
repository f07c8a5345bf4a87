// The .safetensors container (Hugging Face's format, read by PyTorch, JAX, llama.cpp
// and transformers): an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}} padded
// with spaces to 8 bytes, then the tensors' bytes. Writing and reading it, with every
// check a reader needs: a truncated file, a header that does not parse, offsets outside
// the data, a size that does not match the dtype and shape are errors naming the file
// and the tensor (checkpoint::CheckpointError).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dseek::exporting {

enum class TensorDtype { f32, bf16 };
const char* dtype_name(TensorDtype dtype);  // "F32", "BF16"
size_t dtype_bytes(TensorDtype dtype);

struct StoredTensor {
  std::string name;
  TensorDtype dtype = TensorDtype::f32;
  std::vector<int64_t> shape;
  std::vector<char> bytes;  // little-endian elements
  size_t elements() const;
};

// Writes `tensors` in this order to `file` (fsynced; not renamed: the caller writes to
// a temporary name and renames). Throws CheckpointError naming the file.
void write_safetensors(const std::filesystem::path& file, const std::vector<StoredTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

// Every tensor of `file`, in header order (F32 and BF16 only: another dtype is an error
// naming the tensor).
std::vector<StoredTensor> read_safetensors(const std::filesystem::path& file);

// "[2, 3]": a shape in messages.
std::string shape_text(const std::vector<int64_t>& shape);

// The elements of `tensor` as fp32 (bf16 widened exactly).
std::vector<float> to_floats(const StoredTensor& tensor);

}  // namespace dseek::exporting
