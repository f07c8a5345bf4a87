// The ONNX graph of the GPT forward; see onnx_export.hpp. Each block is the same ops as
// model::GptModel's block forward, in the same order.
#include "runtime/export/onnx_export.hpp"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/file_ops.hpp"

namespace dseek::exporting {

namespace {

namespace ck = dseek::checkpoint;

// Adds nodes to a graph with fresh output names.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto& graph) : graph_(graph) {}

  std::string op(const std::string& type, const std::vector<std::string>& inputs,
                 const std::vector<onnx::AttributeProto>& attributes = {}) {
    const std::string out = type + "_" + std::to_string(count_++);
    onnx::NodeProto* node = graph_.add_node();
    node->set_op_type(type);
    node->set_name(out);
    for (const auto& input : inputs) node->add_input(input);
    node->add_output(out);
    for (const auto& attribute : attributes) *node->add_attribute() = attribute;
    return out;
  }

  // An initializer; `dims` of the tensor, `values` its elements.
  void floats(const std::string& name, const std::vector<int64_t>& dims, const float* values,
              size_t count) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(values, count * sizeof(float));  // little-endian, as x86 stores it
  }
  std::string scalar(const std::string& name, float value) {
    floats(name, {}, &value, 1);
    return name;
  }
  std::string int64s(const std::string& name, const std::vector<int64_t>& values,
                     bool as_scalar = false) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!as_scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return name;
  }

 private:
  onnx::GraphProto& graph_;
  int count_ = 0;
};

onnx::AttributeProto int_attribute(const std::string& name, int64_t value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
  return a;
}
onnx::AttributeProto float_attribute(const std::string& name, float value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
  return a;
}
onnx::AttributeProto ints_attribute(const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a.add_ints(v);
  return a;
}

void set_type(onnx::ValueInfoProto* value, onnx::TensorProto::DataType type,
              const std::vector<std::string>& dims) {
  auto* tensor = value->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(type);
  for (const auto& d : dims) {
    auto* dim = tensor->mutable_shape()->add_dim();
    if (!d.empty() && d[0] >= '0' && d[0] <= '9') dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

}  // namespace

void export_onnx(const model::GptShape& shape, std::span<const float> params,
                 const std::filesystem::path& output, int64_t step) {
  const model::ParamLayout layout(shape);
  if (params.size() != layout.total())
    throw ck::CheckpointError(output.string() + ": " + std::to_string(params.size()) +
                              " parameters for a model of " + std::to_string(layout.total()));
  const int64_t C = shape.dim, NH = shape.heads, hs = shape.dim / shape.heads;
  onnx::ModelProto model;
  model.set_ir_version(kOnnxIrVersion);
  model.set_producer_name("dseek");
  model.set_doc_string("GPT (dim " + std::to_string(C) + ", layers " +
                       std::to_string(shape.layers) + ", heads " + std::to_string(NH) +
                       ", context " + std::to_string(shape.context) + ", vocab " +
                       std::to_string(shape.vocab) + ") from a dseek checkpoint, step " +
                       std::to_string(step));
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name("dseek_gpt");
  set_type(graph.add_input(), onnx::TensorProto::INT64, {"batch", "sequence"});
  graph.mutable_input(0)->set_name("input_ids");
  GraphBuilder g(graph);

  for (const model::ParamTensor& t : layout.tensors())
    g.floats(t.name, t.shape, params.data() + t.offset, t.size());
  // The causal mask: 0 on and below the diagonal, -inf above.
  {
    const size_t T = static_cast<size_t>(shape.context);
    std::vector<float> mask(T * T, 0.0f);
    for (size_t i = 0; i < T; ++i)
      for (size_t j = i + 1; j < T; ++j) mask[i * T + j] = -std::numeric_limits<float>::infinity();
    g.floats("causal_mask", {shape.context, shape.context}, mask.data(), mask.size());
  }
  const std::string heads_shape = g.int64s("heads_shape", {0, 0, NH, hs});
  const std::string merged_shape = g.int64s("merged_shape", {0, 0, C});
  const std::string qkv_split = g.int64s("qkv_split", {C, C, C});
  const std::string zeros2 = g.int64s("zeros_2", {0, 0});
  const std::string axes01 = g.int64s("axes_0_1", {0, 1});
  const std::string axis0 = g.int64s("axis_0", {0});
  const std::string zero = g.int64s("zero", {0}, true);
  const std::string one = g.int64s("one", {1}, true);
  const std::string scale = g.scalar("attention_scale", 1.0f / std::sqrt(static_cast<float>(hs)));
  const std::string half = g.scalar("half", 0.5f);
  const std::string unit = g.scalar("unit", 1.0f);
  const std::string gelu_a = g.scalar("gelu_sqrt_2_over_pi", 0.7978845608028654f);
  const std::string gelu_b = g.scalar("gelu_cubic", 0.044715f);

  auto layernorm = [&](const std::string& x, const std::string& w, const std::string& b) {
    return g.op("LayerNormalization", {x, w, b},
                {int_attribute("axis", -1), float_attribute("epsilon", 1e-5f)});
  };
  auto linear = [&](const std::string& x, const std::string& w, const std::string& b) {
    const std::string wt = g.op("Transpose", {w}, {ints_attribute("perm", {1, 0})});
    const std::string y = g.op("MatMul", {x, wt});
    return b.empty() ? y : g.op("Add", {y, b});
  };
  auto gelu = [&](const std::string& x) {
    const std::string cube = g.op("Mul", {x, g.op("Mul", {x, x})});
    const std::string inner = g.op("Mul", {gelu_a, g.op("Add", {x, g.op("Mul", {gelu_b, cube})})});
    return g.op("Mul", {g.op("Mul", {half, x}), g.op("Add", {unit, g.op("Tanh", {inner})})});
  };

  // Embeddings: wte[ids] + wpe[0 .. sequence).
  const std::string length = g.op("Shape", {"input_ids"},
                                  {int_attribute("start", 1), int_attribute("end", 2)});
  const std::string positions = g.op("Range", {zero, g.op("Squeeze", {length, axis0}), one});
  std::string x = g.op("Add", {g.op("Gather", {"wte", "input_ids"}),
                               g.op("Gather", {"wpe", positions})});
  const std::string mask = g.op("Slice", {"causal_mask", zeros2,
                                          g.op("Concat", {length, length},
                                               {int_attribute("axis", 0)}),
                                          axes01});
  for (int64_t l = 0; l < shape.layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    const std::string h = layernorm(x, p + "ln1.weight", p + "ln1.bias");
    const std::string qkv = linear(h, p + "attn.qkv.weight", p + "attn.qkv.bias");
    onnx::NodeProto* split = graph.add_node();
    split->set_op_type("Split");
    split->set_name(p + "split");
    split->add_input(qkv);
    split->add_input(qkv_split);
    for (const char* part : {"q", "k", "v"}) split->add_output(p + part);
    *split->add_attribute() = int_attribute("axis", -1);
    auto heads = [&](const std::string& t, std::vector<int64_t> perm) {  // (B, NH, ., .)
      return g.op("Transpose", {g.op("Reshape", {t, heads_shape})},
                  {ints_attribute("perm", std::move(perm))});
    };
    const std::string q = heads(p + "q", {0, 2, 1, 3});   // (B, NH, T, hs)
    const std::string kt = heads(p + "k", {0, 2, 3, 1});  // (B, NH, hs, T)
    const std::string v = heads(p + "v", {0, 2, 1, 3});
    const std::string scores = g.op("Add", {g.op("Mul", {g.op("MatMul", {q, kt}), scale}), mask});
    const std::string probs = g.op("Softmax", {scores}, {int_attribute("axis", -1)});
    const std::string y = g.op("Reshape", {g.op("Transpose", {g.op("MatMul", {probs, v})},
                                                {ints_attribute("perm", {0, 2, 1, 3})}),
                                           merged_shape});
    const std::string residual2 =
        g.op("Add", {x, linear(y, p + "attn.proj.weight", p + "attn.proj.bias")});
    const std::string h2 = layernorm(residual2, p + "ln2.weight", p + "ln2.bias");
    const std::string up = gelu(linear(h2, p + "mlp.fc.weight", p + "mlp.fc.bias"));
    x = g.op("Add", {residual2, linear(up, p + "mlp.proj.weight", p + "mlp.proj.bias")});
  }
  const std::string logits = linear(layernorm(x, "lnf.weight", "lnf.bias"), "wte", "");
  onnx::ValueInfoProto* out = graph.add_output();
  out->set_name(logits);
  set_type(out, onnx::TensorProto::FLOAT, {"batch", "sequence", std::to_string(shape.vocab)});
  // The graph's output is called logits: an Identity gives it the name.
  onnx::NodeProto* named = graph.add_node();
  named->set_op_type("Identity");
  named->set_name("logits");
  named->add_input(logits);
  named->add_output("logits");
  out->set_name("logits");

  std::string bytes;
  if (!model.SerializeToString(&bytes))
    throw ck::CheckpointError(output.string() + ": the ONNX model does not serialize (over "
                              "protobuf's 2 GB limit?)");
  const std::filesystem::path temp = output.string() + ".tmp";
  try {
    ck::io::OutputFile file(temp);
    file.write(bytes.data(), bytes.size());
    file.sync_and_close();
    ck::io::rename_path(temp, output);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
}

}  // namespace dseek::exporting
