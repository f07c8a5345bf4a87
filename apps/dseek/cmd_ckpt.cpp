// `dseek ckpt`: list the committed checkpoints of a directory, show one's layout and
// tensors, verify every checksum, export its parameters as safetensors or the model as
// ONNX or a Hugging Face GPT-2 folder, or import such a folder (runtime/export/).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "dseek/commands.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/checkpoint/safetensors.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/config/load.hpp"
#include "runtime/export/hf_gpt2.hpp"
#include "runtime/export/import_checkpoint.hpp"
#include "runtime/infer/checkpoint_model.hpp"

namespace dseek::tool {
namespace {

namespace ck = dseek::checkpoint;

constexpr const char* kUsage =
    "usage: dseek ckpt ls DIR          committed checkpoints under DIR: step, size, time\n"
    "       dseek ckpt inspect PATH    a checkpoint's layout, tensors, shapes and sizes\n"
    "       dseek ckpt verify PATH     check every file and checksum (exit 1 if bad)\n"
    "       dseek ckpt export PATH --format safetensors|onnx|hf --output FILE|DIR\n"
    "                         [--dtype fp32|bf16]\n"
    "           safetensors  the parameters under dseek's names, fp32, one file\n"
    "           onnx         the model as ONNX (opset 17): int64 input_ids [batch, sequence]\n"
    "                        -> float logits [batch, sequence, vocab], the weights inside\n"
    "           hf           a new folder Hugging Face tools load as GPT-2: model.safetensors\n"
    "                        (GPT2LMHeadModel's names, Conv1D weights transposed; --dtype\n"
    "                        fp32 or bf16), config.json, and GPT-2's tokenizer files\n"
    "                        (vocab.json, merges.txt, ...) when the model's tokenizer is\n"
    "                        GPT-2's (else TOKENIZER-NOT-INCLUDED.txt says why not)\n"
    "       dseek ckpt import --format hf DIR --output CHECKPOINTS [--config FILE]\n"
    "                                  GPT-2-layout weights (config.json, model.safetensors)\n"
    "                                  as a step-0 checkpoint in CHECKPOINTS (a new folder);\n"
    "                                  train from it with --resume PATH; FILE gives the job's\n"
    "                                  other keys (its model keys must match the import)\n"
    "PATH is a checkpoint directory (RUN_DIR/checkpoints/step-N). Every file is written\n"
    "to a temporary name first and renamed when complete.\n";

const std::vector<std::string> kSubcommands = {"ls", "inspect", "verify", "export", "import"};

std::string format_time(double unix_s) {
  std::time_t seconds = static_cast<std::time_t>(unix_s);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

// A missing directory is an error (exit 3, naming the absolute path); an existing one
// without committed checkpoints is an answer (exit 0).
int list(const std::string& dir) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(dir, error).lexically_normal();
  if (!std::filesystem::is_directory(dir, error))
    throw ck::CheckpointError("no such directory " + absolute.string());
  auto committed = ck::list_committed(dir);
  if (committed.empty()) {
    std::printf("no committed checkpoints under %s\n", absolute.string().c_str());
    return 0;
  }
  std::printf("%-10s %12s  %-19s  %s\n", "step", "bytes", "written", "path");
  for (const auto& entry : committed) {
    std::string written = "?";
    try {
      written = format_time(ck::read_manifest(entry.path).created_unix_s);
    } catch (const ck::CheckpointError&) {
      written = "bad manifest";
    }
    std::printf("%-10" PRId64 " %12" PRIu64 "  %-19s  %s\n", entry.step,
                ck::directory_bytes(entry.path), written.c_str(), entry.path.c_str());
  }
  return 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) out += ", ";
    out += std::to_string(shape[d]);
  }
  return out + "]";
}

int inspect(const std::string& path) {
  const ck::Manifest m = ck::read_manifest(path);
  std::printf("checkpoint %s: format %u, step %" PRId64 ", written %s\n", path.c_str(),
              m.format_version, m.step, format_time(m.created_unix_s).c_str());
  std::printf("layout: world size %u, data %u, tensor %u, pipeline %u, zero %u\n", m.world_size,
              m.data_parallel, m.tensor_parallel, m.pipeline_parallel, m.zero_stage);
  std::printf("data position: seed %" PRId64 ", next step %" PRId64 "; optimizer steps %" PRId64
              "\n",
              m.seed, m.next_step, m.optimizer_steps);
  const auto& p = m.precision;
  std::printf("precision: %s, loss scale %g (%" PRId64 " good steps since its last change)",
              p.precision.empty() ? "not recorded" : p.precision.c_str(), p.loss_scale,
              p.loss_scale_good_steps);
  // A tensor-parallel job keeps a copy per (data replica, tensor rank): each quantizes
  // its own shard (runtime/train/state/sharded_precision_state.hpp).
  if (!p.fp8.empty() && m.tensor_parallel > 1)
    std::printf(", fp8 scaling of %zu operands x %" PRId64 " copies (data %u x tensor %u; amax "
                "history %" PRId64 ")",
                p.fp8.tensors(), p.fp8.replicas, m.data_parallel, m.tensor_parallel,
                p.fp8.history_length);
  else if (!p.fp8.empty())
    std::printf(", fp8 scaling of %zu operands x %" PRId64 " replica(s) (amax history %" PRId64
                ")",
                p.fp8.tensors(), p.fp8.replicas, p.fp8.history_length);
  std::printf("\n");
  for (const auto& file : m.files) {
    std::printf("file %s: %" PRIu64 " bytes\n", file.name.c_str(), file.bytes);
  }
  std::printf("%zu tensor shards:\n", m.tensors.size());
  std::printf("  %-7s %-28s %-14s %12s %12s  %-11s %12s  %s\n", "role", "name", "shape",
              "slice_off", "elements", "file", "byte_off", "xxh64");
  uint64_t params = 0;
  for (const auto& t : m.tensors) {
    if (t.role == ck::Role::param) params += t.slice_count;
    std::printf("  %-7s %-28s %-14s %12" PRIu64 " %12" PRIu64 "  %-11s %12" PRIu64 "  %016" PRIx64 "\n",
                ck::role_name(t.role), t.name.c_str(), shape_text(t.shape).c_str(), t.slice_offset,
                t.slice_count, t.file.c_str(), t.byte_offset, t.xxhash64);
  }
  std::printf("parameters: %" PRIu64 " (%" PRIu64 " bytes fp32)\n", params, params * 4);
  return 0;
}

int verify(const std::string& path) {
  try {
    const ck::Manifest m = ck::verify(path);
    std::printf("ok: %s, step %" PRId64 ", %zu tensor shards in %zu files, every checksum matches%s\n",
                path.c_str(), m.step, m.tensors.size(), m.files.size(),
                m.format_version >= 2
                    ? " (each bound to its tensor's name, shape and dtype; the manifest's own too)"
                    : " (format 1, written by an older dseek: its checksums cover the bytes alone, "
                      "so a swapped or renamed tensor entry cannot be detected in it)");
    return 0;
  } catch (const ck::CheckpointError& error) {
    std::fprintf(stderr, "dseek ckpt verify: BAD: %s\n", error.what());
    return 1;
  }
}

// The ONNX export runs in dseek-onnx-export, beside this program (apps/onnx_export/
// main.cpp: ONNX's protobuf and SentencePiece's cannot share a process). Its exit status.
int export_onnx_beside(const std::string& path, const std::string& output) {
  const auto tool = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "dseek-onnx-export";
  if (!std::filesystem::exists(tool))
    throw std::runtime_error("--format onnx needs " + tool.string() + " (built with dseek)");
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("cannot start " + tool.string());
  if (child == 0) {
    execl(tool.c_str(), tool.c_str(), path.c_str(), output.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int export_checkpoint(const Args& args) {
  std::string path, format, output, dtype = "fp32";
  for (size_t i = 1; i < args.size(); ++i) {
    if (cli::take_value(args, i, "--format", format) || cli::take_value(args, i, "--output", output) ||
        cli::take_value(args, i, "--dtype", dtype))
      continue;
    if (args[i].rfind("-", 0) == 0)
      cli::unknown("option", args[i], {"--format", "--output", "--dtype", "--help"});
    if (!path.empty()) throw cli::UsageError("unexpected argument '" + args[i] + "' (one PATH only)");
    path = args[i];
  }
  if (path.empty() || output.empty()) throw cli::UsageError("export needs PATH and --output FILE");
  if (format != "safetensors" && format != "onnx" && format != "hf")
    throw cli::UsageError("--format must be safetensors, onnx or hf, not '" + format + "'");
  if (dtype != "fp32" && dtype != "bf16")
    throw cli::UsageError("--dtype must be fp32 or bf16, not '" + dtype + "'");
  if (dtype != "fp32" && format != "hf")
    throw cli::UsageError("--dtype " + dtype + " is for --format hf (" + format + " is fp32)");
  if (format == "safetensors") {
    const uint64_t tensors = ck::export_safetensors(path, output);
    std::printf("wrote %s: %" PRIu64 " tensors (parameters)\n", output.c_str(), tensors);
    return 0;
  }
  if (format == "onnx") return export_onnx_beside(path, output);
  const auto model = infer::load_checkpoint_model(path, {}, nullptr);
  exporting::HfExportInfo info;
  info.dtype = dtype == "bf16" ? exporting::TensorDtype::bf16 : exporting::TensorDtype::f32;
  info.step = model.step;
  std::string tokenizer_note, why;
  std::unique_ptr<data::Tokenizer> tokenizer;
  try {  // its end-of-text id goes into config.json, its files (GPT-2's) beside the model
    tokenizer = infer::open_model_tokenizer(model, "");
    info.end_of_text = tokenizer->separator();
  } catch (const std::exception& error) {
    why = error.what();
    tokenizer_note = std::string("; no bos/eos_token_id: ") + why;
  }
  exporting::HfTokenizerFiles files =
      exporting::hf_tokenizer_files(tokenizer.get(), why, model.shape.context);
  info.files = std::move(files.files);
  exporting::export_hf_gpt2(model.shape, model.params, output, info);
  std::printf("wrote %s: model.safetensors (GPT-2 layout, %s), config.json%s, step %" PRId64
              "%s\n",
              output.c_str(), dtype.c_str(),
              files.note.empty() ? " and GPT-2's tokenizer files (vocab.json, merges.txt)" : "",
              model.step, tokenizer_note.c_str());
  if (!files.note.empty()) std::fprintf(stderr, "dseek ckpt export: %s\n", files.note.c_str());
  return 0;
}

int import_checkpoint(const Args& args) {
  std::string dir, format, output, config_file;
  for (size_t i = 1; i < args.size(); ++i) {
    if (cli::take_value(args, i, "--format", format) || cli::take_value(args, i, "--output", output) ||
        cli::take_value(args, i, "--config", config_file))
      continue;
    if (args[i].rfind("-", 0) == 0)
      cli::unknown("option", args[i], {"--format", "--output", "--config", "--help"});
    if (!dir.empty()) throw cli::UsageError("unexpected argument '" + args[i] + "' (one DIR only)");
    dir = args[i];
  }
  if (dir.empty() || output.empty()) throw cli::UsageError("import needs DIR and --output CHECKPOINTS");
  if (format != "hf") throw cli::UsageError("--format must be hf (the GPT-2 layout)");
  config::JobConfig job = config_file.empty() ? config::default_config()
                                              : config::load_config(config_file);
  const exporting::HfGpt2 model = exporting::import_hf_gpt2(dir);
  if (!config_file.empty()) {
    const auto& m = job.model;
    const auto& s = model.shape;
    if (m.dim != s.dim || m.layers != s.layers || m.heads != s.heads || m.context != s.context ||
        m.vocab != s.vocab)
      throw config::ConfigError(
          config_file + ": its model (dim " + std::to_string(m.dim) + ", layers " +
          std::to_string(m.layers) + ", heads " + std::to_string(m.heads) + ", context " +
          std::to_string(m.context) + ", vocab " + std::to_string(m.vocab) + ") is not the " +
          "imported one (" + std::to_string(s.dim) + ", " + std::to_string(s.layers) + ", " +
          std::to_string(s.heads) + ", " + std::to_string(s.context) + ", " +
          std::to_string(s.vocab) + ")");
  }
  const auto written = exporting::write_imported_checkpoint(model, job, output);
  std::printf("wrote %s: %zu parameters (dim %" PRId64 ", layers %" PRId64 ", heads %" PRId64
              ", context %" PRId64 ", vocab %" PRId64 ") from %s\n",
              written.string().c_str(), model.params.size(), model.shape.dim, model.shape.layers,
              model.shape.heads, model.shape.context, model.shape.vocab, dir.c_str());
  return 0;
}

int run_ckpt(const Args& args) {
  if (args.empty())
    throw cli::UsageError("a subcommand is required (ls, inspect, verify, export, import)");
  const std::string& sub = args[0];
  if (std::find(kSubcommands.begin(), kSubcommands.end(), sub) == kSubcommands.end())
    cli::unknown(sub.rfind("-", 0) == 0 ? "option" : "subcommand", sub, kSubcommands);
  if (sub == "export") return export_checkpoint(args);
  if (sub == "import") return import_checkpoint(args);
  if (args.size() != 2) throw cli::UsageError(sub + " takes one path");
  if (args[1].rfind("-", 0) == 0) cli::unknown("option", args[1], {"--help"});
  if (sub == "ls") return list(args[1]);
  if (sub == "inspect") return inspect(args[1]);
  return verify(args[1]);
}

}  // namespace

const Command& ckpt_command() {
  static const Command command{
      "ckpt",
      "  ckpt ls DIR                    committed checkpoints: step, size, time\n"
      "  ckpt inspect PATH              a checkpoint's layout, tensors and shapes\n"
      "  ckpt verify PATH               check every checksum (exit 1 naming the bad one)\n"
      "  ckpt export PATH --format safetensors|onnx|hf --output FILE|DIR\n"
      "                                 the parameters as .safetensors, ONNX, or GPT-2's layout\n"
      "  ckpt import --format hf DIR --output CHECKPOINTS\n"
      "                                 GPT-2-layout weights as a checkpoint to train from\n",
      kUsage, run_ckpt};
  return command;
}

}  // namespace dseek::tool
