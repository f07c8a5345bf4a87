// Writing and reading .safetensors files; see safetensors_file.hpp.
#include "runtime/export/safetensors_file.hpp"

#include <simdjson.h>

#include <cstring>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/file_ops.hpp"
#include "runtime/numerics/bf16.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::exporting {

namespace fs = std::filesystem;
using checkpoint::CheckpointError;

const char* dtype_name(TensorDtype dtype) { return dtype == TensorDtype::f32 ? "F32" : "BF16"; }
size_t dtype_bytes(TensorDtype dtype) { return dtype == TensorDtype::f32 ? 4 : 2; }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

size_t StoredTensor::elements() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

void write_safetensors(const fs::path& file, const std::vector<StoredTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    if (!first) header += ',';
    first = false;
    header += util::json_quote(key);
    header += ':';
    header += util::json_quote(value);
  }
  header += '}';
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.bytes.size() != t.elements() * dtype_bytes(t.dtype))
      throw CheckpointError(file.string() + ": tensor " + t.name + " has " +
                            std::to_string(t.bytes.size()) + " bytes for its shape");
    // Two appends: `"," + std::string` trips GCC 12's -Wrestrict false positive.
    header += ',';
    header += util::json_quote(t.name);
    header += ":{\"dtype\":\"";
    header += dtype_name(t.dtype);
    header += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d > 0) header += ',';
      header += std::to_string(t.shape[d]);
    }
    const uint64_t end = offset + t.bytes.size();
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += '}';
  while (header.size() % 8 != 0) header += ' ';  // the data starts 8-byte aligned
  checkpoint::io::OutputFile out(file);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  out.write(length, sizeof length);
  out.write(header.data(), header.size());
  for (const auto& t : tensors) out.write(t.bytes.data(), t.bytes.size());
  out.sync_and_close();
}

std::vector<StoredTensor> read_safetensors(const fs::path& file) {
  const std::vector<char> data = checkpoint::io::read_whole(file);
  const std::string where = file.string();
  if (data.size() < 8)
    throw CheckpointError(where + ": " + std::to_string(data.size()) +
                          " bytes, too short for a safetensors file (truncated?)");
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i)
    header_size |= static_cast<uint64_t>(static_cast<uint8_t>(data[i])) << (8 * i);
  if (header_size > data.size() - 8)
    throw CheckpointError(where + ": the header says " + std::to_string(header_size) +
                          " bytes, the file has " + std::to_string(data.size() - 8) +
                          " after the length (truncated?)");
  const size_t data_start = 8 + header_size;
  const size_t data_size = data.size() - data_start;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.parse(data.data() + 8, header_size).get(root))
    throw CheckpointError(where + ": the header is not JSON (" +
                          std::string(simdjson::error_message(error)) + ")");
  simdjson::dom::object header;
  if (root.get(header)) throw CheckpointError(where + ": the header is not a JSON object");
  std::vector<StoredTensor> tensors;
  for (auto field : header) {
    const std::string name(field.key);
    if (name == "__metadata__") continue;
    const std::string tensor_where = where + ": tensor " + name;
    std::string_view dtype;
    simdjson::dom::array shape, offsets;
    if (field.value["dtype"].get(dtype) || field.value["shape"].get(shape) ||
        field.value["data_offsets"].get(offsets))
      throw CheckpointError(tensor_where + ": needs dtype, shape and data_offsets");
    StoredTensor t;
    t.name = name;
    if (dtype == "F32") t.dtype = TensorDtype::f32;
    else if (dtype == "BF16") t.dtype = TensorDtype::bf16;
    else
      throw CheckpointError(tensor_where + ": dtype " + std::string(dtype) +
                            " (F32 and BF16 are read)");
    // The element count in bytes, overflow checked: a shape whose product wraps around
    // would otherwise match a few bytes.
    uint64_t bytes = dtype_bytes(t.dtype);
    for (auto d : shape) {
      int64_t extent = 0;
      if (d.get(extent) || extent < 0) throw CheckpointError(tensor_where + ": a bad shape");
      t.shape.push_back(extent);
      if (extent != 0 && bytes > UINT64_MAX / static_cast<uint64_t>(extent))
        throw CheckpointError(tensor_where + ": shape " + shape_text(t.shape) +
                              (t.shape.size() < shape.size() ? " ..." : "") +
                              " has more elements than any file holds");
      bytes *= static_cast<uint64_t>(extent);
    }
    std::vector<uint64_t> range;
    for (auto o : offsets) {
      uint64_t v = 0;
      if (o.get(v)) throw CheckpointError(tensor_where + ": bad data_offsets");
      range.push_back(v);
    }
    if (range.size() != 2 || range[0] > range[1])
      throw CheckpointError(tensor_where + ": bad data_offsets");
    if (range[1] > data_size)
      throw CheckpointError(tensor_where + ": its bytes end at " + std::to_string(range[1]) +
                            ", the file's data has " + std::to_string(data_size) +
                            " (truncated?)");
    if (range[1] - range[0] != bytes)
      throw CheckpointError(tensor_where + ": " + std::to_string(range[1] - range[0]) +
                            " bytes do not hold its shape in " + std::string(dtype));
    t.bytes.assign(data.begin() + static_cast<std::ptrdiff_t>(data_start + range[0]),
                   data.begin() + static_cast<std::ptrdiff_t>(data_start + range[1]));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::vector<float> to_floats(const StoredTensor& t) {
  std::vector<float> out(t.elements());
  if (t.dtype == TensorDtype::f32) {
    std::memcpy(out.data(), t.bytes.data(), out.size() * sizeof(float));
  } else {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t bits = 0;
      std::memcpy(&bits, t.bytes.data() + 2 * i, 2);
      out[i] = numerics::bf16_to_fp32(bits);
    }
  }
  return out;
}

}  // namespace dseek::exporting
