// dseek-onnx-export CHECKPOINT OUTPUT: the ONNX export of `dseek ckpt export --format
// onnx`, in a process of its own. Why: ONNX's classes need Debian's libprotobuf (3.21),
// and Debian's libsentencepiece carries its own protobuf (3.14) under the same symbol
// names; in one process one of them calls the other's runtime, and SentencePiece models
// fail to load ("compiled against version 3.14.0 of the Protocol Buffer runtime"). So
// `dseek` never links protobuf, and runs this program, installed beside it, to export.
// Exit status as dseek's: 0 done, 3 a permanent failure (a bad checkpoint, an unwritable
// output), 1 otherwise; the reason on stderr.
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <string>

#include "runtime/export/onnx_export.hpp"
#include "runtime/infer/checkpoint_model.hpp"
#include "runtime/util/failure_kind.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dseek-onnx-export CHECKPOINT OUTPUT (run by dseek ckpt export "
                         "--format onnx)\n");
    return 2;
  }
  try {
    const auto model = dseek::infer::load_checkpoint_model(argv[1], {}, nullptr);
    dseek::exporting::export_onnx(model.shape, model.params, argv[2], model.step);
    std::printf("wrote %s: ONNX opset %" PRId64 ", %zu parameters of step %" PRId64 "\n", argv[2],
                dseek::exporting::kOnnxOpset, model.params.size(), model.step);
    return 0;
  } catch (const std::exception& error) {
    std::fflush(stdout);
    std::fprintf(stderr, "dseek ckpt export: %s\n", dseek::util::describe_failure(error).c_str());
    return dseek::util::classify_failure(error).permanent ? 3 : 1;
  }
}
