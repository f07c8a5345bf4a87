// cuDNN's fused attention graphs (gpu/cudnn/attention_graphs.hpp) on a machine without a
// GPU: every tensor and operation descriptor of the forward and both backward variants
// finalizes for GPT-2's shape and a small one, so a wrong stride, port or data type
// fails here, not first on a lent GPU. What needs a device (the operation graph, the
// engines cuDNN picks, the numbers) is the GPU parity test "cuDNN attention matches the
// CPU's bf16 attention" in dseek_gpu_tests. Without libcudnn_graph.so.9 the binary exits
// 77 (skipped).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <limits>
#include <string>

#include "gpu/cudnn/attention_graphs.hpp"
#include "gpu/cudnn/cudnn_graph.hpp"

using namespace dseek::gpu::cudnn;

namespace {
const Library& lib() { return *library(); }
constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("cuDNN attention graphs: every descriptor finalizes", "[cudnn]") {
  struct Shape4 { int B, T, C, NH; };
  // GPT-2 124M at batch 16 x 1024; a small shape with head size 8; head size 128
  for (const Shape4& s : {Shape4{16, 1024, 768, 12}, Shape4{2, 150, 16, 2}, Shape4{1, 64, 256, 2}}) {
    INFO("B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH);
    auto forward = attention_forward_graph(lib(), s.B, s.T, s.C, s.NH, kMinusInfinity);
    // Q as the graph sees it: a strided view of the (B, T, 3C) rows
    const int64_t hs = s.C / s.NH;
    CHECK(forward->dims(kQ) == Shape{s.B, s.NH, s.T, hs});
    CHECK(forward->strides(kQ) == Shape{int64_t{s.T} * 3 * s.C, hs, 3 * s.C, 1});
    CHECK(forward->dims(kK) == Shape{s.B, s.NH, hs, s.T});  // K^T
    CHECK(forward->strides(kO) == Shape{int64_t{s.T} * s.C, hs, s.C, 1});
    CHECK(forward->dims(kStats) == Shape{s.B, s.NH, s.T, 1});
    auto deterministic = attention_backward_graph(lib(), s.B, s.T, s.C, s.NH, kMinusInfinity, true);
    CHECK(deterministic->dims(kDK) == Shape{s.B, s.NH, s.T, hs});
    auto accumulating = attention_backward_graph(lib(), s.B, s.T, s.C, s.NH, kMinusInfinity, false);
    CHECK(accumulating->dims(kDQAccum) == Shape{s.B, s.NH, s.T, hs});
  }
}

TEST_CASE("cuDNN graph: a product of mismatched shapes fails, naming the file and the check",
          "[cudnn]") {
  auto graph = std::make_shared<Graph>(lib());
  const int64_t a = graph->tensor(1, {1, 1, 4, 8}, packed_strides({1, 1, 4, 8}), CUDNN_DATA_BFLOAT16);
  const int64_t b = graph->tensor(2, {1, 1, 9, 4}, packed_strides({1, 1, 9, 4}), CUDNN_DATA_BFLOAT16);
  const int64_t c = graph->virtual_tensor({1, 1, 4, 4}, packed_strides({1, 1, 4, 4}));
  CHECK_THROWS_WITH(graph->matmul_into(c, a, b),
                    Catch::Contains("gpu/cudnn/cudnn_graph.cpp:") &&
                        Catch::Contains("CUDNN_STATUS_BAD_PARAM"));
  // uids are the graph's own: one used twice is a programming error
  CHECK_THROWS_WITH(graph->tensor(1, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT),
                    Catch::Contains("uid 1 used twice"));
}

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (int status = session.applyCommandLine(argc, argv); status != 0) return status;
  const Catch::ConfigData& config = session.configData();
  const bool only_lists = config.listTests || config.listTestNamesOnly || config.listTags;
  std::string why_not;
  if (!only_lists && library(&why_not) == nullptr) {
    std::printf("dseek_cudnn_graph_tests: SKIPPED, cuDNN cannot be loaded: %s\n", why_not.c_str());
    return 77;
  }
  return session.run();
}
