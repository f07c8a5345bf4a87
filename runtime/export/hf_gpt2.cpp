// The Hugging Face GPT-2 layout; see hf_gpt2.hpp.
#include "runtime/export/hf_gpt2.hpp"

#include <simdjson.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/file_ops.hpp"
#include "runtime/numerics/bf16.hpp"

namespace dseek::exporting {

namespace fs = std::filesystem;
using checkpoint::CheckpointError;

namespace {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kConfigFile = "config.json";
constexpr const char* kPrefix = "transformer.";

struct HfName {
  std::string name;     // with the transformer. prefix
  bool conv1d = false;  // stored (in, out): dseek's (out, in) transposed
};

// dseek's tensor name -> GPT-2's.
HfName hf_name(const std::string& dseek_name) {
  static const std::vector<std::pair<std::string, HfName>> kBlockSuffixes = {
      {"ln1.weight", {"ln_1.weight"}},           {"ln1.bias", {"ln_1.bias"}},
      {"attn.qkv.weight", {"attn.c_attn.weight", true}},
      {"attn.qkv.bias", {"attn.c_attn.bias"}},
      {"attn.proj.weight", {"attn.c_proj.weight", true}},
      {"attn.proj.bias", {"attn.c_proj.bias"}},
      {"ln2.weight", {"ln_2.weight"}},           {"ln2.bias", {"ln_2.bias"}},
      {"mlp.fc.weight", {"mlp.c_fc.weight", true}}, {"mlp.fc.bias", {"mlp.c_fc.bias"}},
      {"mlp.proj.weight", {"mlp.c_proj.weight", true}},
      {"mlp.proj.bias", {"mlp.c_proj.bias"}}};
  if (dseek_name == "wte") return {std::string(kPrefix) + "wte.weight"};
  if (dseek_name == "wpe") return {std::string(kPrefix) + "wpe.weight"};
  if (dseek_name == "lnf.weight") return {std::string(kPrefix) + "ln_f.weight"};
  if (dseek_name == "lnf.bias") return {std::string(kPrefix) + "ln_f.bias"};
  const size_t dot = dseek_name.find('.', 2);  // "h.N." ends at the second dot
  const std::string block = dseek_name.substr(0, dot + 1), rest = dseek_name.substr(dot + 1);
  for (const auto& [suffix, hf] : kBlockSuffixes)
    if (rest == suffix) return {kPrefix + block + hf.name, hf.conv1d};
  throw std::logic_error("hf_gpt2: no GPT-2 name for dseek tensor " + dseek_name);
}

std::vector<int64_t> hf_shape(const model::ParamTensor& t, bool conv1d) {
  return conv1d ? std::vector<int64_t>{t.shape[1], t.shape[0]} : t.shape;
}

// (rows, cols) row-major -> (cols, rows).
std::vector<float> transposed(const float* in, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = in[r * cols + c];
  return out;
}

std::string config_json(const model::GptShape& s, const HfExportInfo& info) {
  const std::string eot = info.end_of_text >= 0 ? std::to_string(info.end_of_text) : "null";
  return "{\n"
         "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
         "  \"model_type\": \"gpt2\",\n"
         "  \"vocab_size\": " + std::to_string(s.vocab) + ",\n"
         "  \"n_positions\": " + std::to_string(s.context) + ",\n"
         "  \"n_ctx\": " + std::to_string(s.context) + ",\n"
         "  \"n_embd\": " + std::to_string(s.dim) + ",\n"
         "  \"n_layer\": " + std::to_string(s.layers) + ",\n"
         "  \"n_head\": " + std::to_string(s.heads) + ",\n"
         "  \"n_inner\": null,\n"
         "  \"activation_function\": \"gelu_new\",\n"
         "  \"layer_norm_epsilon\": 1e-05,\n"
         "  \"resid_pdrop\": 0.0,\n"
         "  \"embd_pdrop\": 0.0,\n"
         "  \"attn_pdrop\": 0.0,\n"
         "  \"initializer_range\": 0.02,\n"
         "  \"scale_attn_weights\": true,\n"
         "  \"scale_attn_by_inverse_layer_idx\": false,\n"
         "  \"reorder_and_upcast_attn\": false,\n"
         "  \"tie_word_embeddings\": true,\n"
         "  \"bos_token_id\": " + eot + ",\n"
         "  \"eos_token_id\": " + eot + ",\n"
         "  \"use_cache\": true,\n"
         "  \"torch_dtype\": \"" + (info.dtype == TensorDtype::f32 ? "float32" : "bfloat16") +
         "\"\n}\n";
}

}  // namespace

void export_hf_gpt2(const model::GptShape& shape, std::span<const float> params,
                    const fs::path& dir, const HfExportInfo& info) {
  const model::ParamLayout layout(shape);
  if (params.size() != layout.total())
    throw CheckpointError(dir.string() + ": " + std::to_string(params.size()) +
                          " parameters for a model of " + std::to_string(layout.total()));
  std::error_code error;
  if (fs::exists(dir, error))
    throw CheckpointError(dir.string() + " exists: the export writes a new folder (remove it "
                          "or choose another --output)");
  std::vector<StoredTensor> tensors;
  for (const model::ParamTensor& t : layout.tensors()) {
    const HfName hf = hf_name(t.name);
    StoredTensor out;
    out.name = hf.name;
    out.dtype = info.dtype;
    out.shape = hf_shape(t, hf.conv1d);
    std::vector<float> values(params.begin() + static_cast<std::ptrdiff_t>(t.offset),
                              params.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size()));
    if (hf.conv1d) values = transposed(values.data(), t.shape[0], t.shape[1]);
    if (info.dtype == TensorDtype::f32) {
      out.bytes.resize(values.size() * sizeof(float));
      std::memcpy(out.bytes.data(), values.data(), out.bytes.size());
    } else {
      out.bytes.resize(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t bits = numerics::fp32_to_bf16(values[i]);
        std::memcpy(out.bytes.data() + 2 * i, &bits, 2);
      }
    }
    tensors.push_back(std::move(out));
  }
  const fs::path temp = dir.string() + ".tmp-" + std::to_string(::getpid());
  try {
    fs::remove_all(temp);
    fs::create_directories(temp);
    write_safetensors(temp / kModelFile, tensors,
                      {{"format", "pt"}, {"step", std::to_string(info.step)},
                       {"producer", "dseek"}});
    checkpoint::io::OutputFile config(temp / kConfigFile);
    const std::string text = config_json(shape, info);
    config.write(text.data(), text.size());
    config.sync_and_close();
    for (const FolderFile& file : info.files) {
      checkpoint::io::OutputFile out(temp / file.name);
      out.write(file.contents.data(), file.contents.size());
      out.sync_and_close();
    }
    checkpoint::io::sync_directory(temp);
    checkpoint::io::rename_path(temp, dir);
    checkpoint::io::sync_directory(dir.has_parent_path() ? dir.parent_path() : fs::path("."));
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(temp, error);
    throw CheckpointError(dir.string() + ": " + e.what());
  } catch (...) {
    fs::remove_all(temp, error);
    throw;
  }
}

namespace {

int64_t config_int(simdjson::dom::object& config, const std::string& where, const char* key,
                   std::optional<int64_t> fallback = std::nullopt) {
  simdjson::dom::element value;
  if (config[key].get(value)) {
    if (fallback) return *fallback;
    throw CheckpointError(where + ": no \"" + key + "\"");
  }
  int64_t n = 0;
  if (value.get(n) || n < 1) throw CheckpointError(where + ": \"" + key + "\" must be a positive integer");
  return n;
}

// A key dseek's architecture fixes: absent, or the value GPT-2 has.
void require(simdjson::dom::object& config, const std::string& where, const char* key,
             const std::function<bool(simdjson::dom::element)>& fits, const char* expected) {
  simdjson::dom::element value;
  if (config[key].get(value)) return;
  if (!fits(value))
    throw CheckpointError(where + ": \"" + key + "\" must be " + expected +
                          " (dseek's GPT-2 architecture)");
}

// GPT-2's parameter count for `s` (V*C + T*C + L*(12*C*C + 13*C) + 2*C), UINT64_MAX
// when it does not fit 64 bits.
uint64_t parameter_count_bound(const model::GptShape& s) {
  const auto c = static_cast<uint64_t>(s.dim), l = static_cast<uint64_t>(s.layers);
  uint64_t cc = 0, block = 0, blocks = 0, embed = 0, total = 0;
  if (__builtin_mul_overflow(c, c, &cc) || __builtin_mul_overflow(cc, 12u, &block) ||
      __builtin_add_overflow(block, 13 * c, &block) || __builtin_mul_overflow(block, l, &blocks) ||
      __builtin_mul_overflow(static_cast<uint64_t>(s.vocab) + static_cast<uint64_t>(s.context), c,
                             &embed) ||
      __builtin_add_overflow(blocks, embed, &total) ||
      __builtin_add_overflow(total, 2 * c, &total))
    return UINT64_MAX;
  return total;
}

}  // namespace

HfGpt2 import_hf_gpt2(const fs::path& dir) {
  const fs::path config_path = dir / kConfigFile;
  const std::string where = config_path.string();
  const std::vector<char> text = checkpoint::io::read_whole(config_path);
  // (An empty buffer would reach simdjson as a null pointer: found by fuzz_hf_import.)
  if (text.empty()) throw CheckpointError(where + ": empty, not a JSON object");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.parse(text.data(), text.size()).get(root))
    throw CheckpointError(where + ": not JSON (" + std::string(simdjson::error_message(error)) + ")");
  simdjson::dom::object config;
  if (root.get(config)) throw CheckpointError(where + ": not a JSON object");
  auto is_string = [](const char* s) {
    return [s](simdjson::dom::element v) {
      std::string_view got;
      return !v.get(got) && got == s;
    };
  };
  require(config, where, "model_type", is_string("gpt2"), "\"gpt2\"");
  require(config, where, "activation_function",
          [](simdjson::dom::element v) {
            std::string_view got;
            return !v.get(got) && (got == "gelu_new" || got == "gelu_pytorch_tanh");
          },
          "\"gelu_new\" (the tanh GELU)");
  require(config, where, "layer_norm_epsilon",
          [](simdjson::dom::element v) {
            double eps = 0;
            return !v.get(eps) && std::abs(eps - 1e-5) < 1e-12;
          },
          "1e-5");
  auto is_bool = [](bool expected) {
    return [expected](simdjson::dom::element v) {
      bool got = false;
      return !v.get(got) && got == expected;
    };
  };
  require(config, where, "tie_word_embeddings", is_bool(true), "true (a head tied to wte)");
  require(config, where, "scale_attn_weights", is_bool(true), "true");
  require(config, where, "scale_attn_by_inverse_layer_idx", is_bool(false), "false");
  HfGpt2 model;
  model.shape.dim = config_int(config, where, "n_embd");
  model.shape.layers = config_int(config, where, "n_layer");
  model.shape.heads = config_int(config, where, "n_head");
  model.shape.vocab = config_int(config, where, "vocab_size");
  model.shape.context = config_int(config, where, "n_positions");
  require(config, where, "n_inner",
          [&](simdjson::dom::element v) {
            int64_t inner = 0;
            return v.is_null() || (!v.get(inner) && inner == 4 * model.shape.dim);
          },
          "null or 4 * n_embd");
  if (model.shape.dim % model.shape.heads != 0)
    throw CheckpointError(where + ": n_embd " + std::to_string(model.shape.dim) +
                          " is not divisible by n_head " + std::to_string(model.shape.heads));

  const fs::path model_path = dir / kModelFile;
  const std::vector<StoredTensor> stored = read_safetensors(model_path);
  // Sizes that the file's tensors cannot back are refused before anything is allocated
  // for them (n_embd 2^40 would overflow the layout's sizes, n_layer 10^12 ask for 10^13
  // tensor entries).
  uint64_t stored_bytes = 0;
  for (const StoredTensor& s : stored) stored_bytes += s.bytes.size();
  const uint64_t needed = parameter_count_bound(model.shape);
  if (needed > stored_bytes / 2)
    throw CheckpointError(where + ": n_embd " + std::to_string(model.shape.dim) + ", n_layer " +
                          std::to_string(model.shape.layers) + ", vocab_size " +
                          std::to_string(model.shape.vocab) + ", n_positions " +
                          std::to_string(model.shape.context) + " make " +
                          (needed == UINT64_MAX ? std::string("more than 2^64")
                                                : std::to_string(needed)) +
                          " parameters, more than the tensors of " + model_path.string() + " (" +
                          std::to_string(stored_bytes) + " bytes) hold even in bf16");
  const model::ParamLayout layout(model.shape);
  std::map<std::string, const model::ParamTensor*> by_hf_name;
  std::map<std::string, bool> conv1d;
  for (const model::ParamTensor& t : layout.tensors()) {
    const HfName hf = hf_name(t.name);
    by_hf_name[hf.name] = &t;
    conv1d[hf.name] = hf.conv1d;
  }
  model.params.assign(layout.total(), 0.0f);
  std::map<std::string, bool> seen;
  const StoredTensor* lm_head = nullptr;
  for (const StoredTensor& s : stored) {
    std::string name = s.name;
    if (name.rfind(kPrefix, 0) != 0) name = kPrefix + name;
    const std::string tensor_where = model_path.string() + ": tensor " + s.name;
    if (s.name == "lm_head.weight") {
      lm_head = &s;
      continue;
    }
    const bool mask_buffer = name.size() > 10 && name.rfind("transformer.h.", 0) == 0 &&
                             (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"));
    if (mask_buffer) continue;  // GPT-2's causal-mask buffers, not parameters
    auto found = by_hf_name.find(name);
    if (found == by_hf_name.end())
      throw CheckpointError(tensor_where + " is not a tensor of GPT-2 with " +
                            std::to_string(model.shape.layers) + " layers (" + where + ")");
    if (seen[name]) throw CheckpointError(tensor_where + " appears twice");
    seen[name] = true;
    const model::ParamTensor& t = *found->second;
    const std::vector<int64_t> expected = hf_shape(t, conv1d[name]);
    if (s.shape != expected)
      throw CheckpointError(tensor_where + " has shape " + shape_text(s.shape) + "; " + where +
                            " makes it " + shape_text(expected));
    std::vector<float> values = to_floats(s);
    if (conv1d[name]) values = transposed(values.data(), t.shape[1], t.shape[0]);
    std::copy(values.begin(), values.end(), model.params.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  for (const auto& [name, tensor] : by_hf_name)
    if (!seen[name])
      throw CheckpointError(model_path.string() + ": tensor " + name + " (shape " +
                            shape_text(hf_shape(*tensor, conv1d[name])) + ") is missing");
  if (lm_head != nullptr) {
    const std::vector<float> head = to_floats(*lm_head);
    const float* wte = model.params.data() + layout.wte();
    if (head.size() != static_cast<size_t>(model.shape.vocab * model.shape.dim) ||
        std::memcmp(head.data(), wte, head.size() * sizeof(float)) != 0)
      throw CheckpointError(model_path.string() + ": tensor lm_head.weight differs from "
                            "transformer.wte.weight: dseek's head is tied to the embedding");
  }
  return model;
}

}  // namespace dseek::exporting
