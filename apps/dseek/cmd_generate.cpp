// `dseek generate`: samples text from a trained checkpoint. The checkpoint's recorded
// config gives the model's shape, its data set's index the tokenizer; the prompt is run
// in one forward, then one token per step through a KV cache (runtime/infer/), and the
// text is written to stdout as it comes. A summary line (speeds, why it stopped, the
// seed to repeat it) goes to stderr.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dseek/commands.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_error.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/config/load.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/infer/checkpoint_model.hpp"
#include "runtime/infer/decoder.hpp"
#include "runtime/infer/generate.hpp"

namespace dseek::tool {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: dseek generate --checkpoint PATH|latest [--config FILE] [--run-dir DIR]\n"
    "                      (--prompt TEXT | --prompt-file FILE) [--max-tokens N]\n"
    "                      [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
    "                      [--threads N] [--device cpu|cuda] [--tokenizer NAME]\n"
    "                      [--ignore-end-of-text]\n"
    "Samples text from a trained model and writes it to stdout as it is produced.\n"
    "  --checkpoint    a checkpoint directory (RUN_DIR/checkpoints/step-N), or latest: the\n"
    "                  newest committed one of the run that --config (its train.run_dir,\n"
    "                  checkpoint.dir) and --run-dir name, as --resume latest finds it\n"
    "  --prompt        the text to continue (\"\": start a new document); --prompt-file\n"
    "                  reads it from FILE\n"
    "  --max-tokens    new tokens at most (default 256)\n"
    "  --temperature   softmax temperature (default 1; 0: greedy, the most likely token)\n"
    "  --top-k         sample among the K most likely tokens only (default 0: all)\n"
    "  --top-p         ... and among the fewest most likely whose probability reaches P\n"
    "                  (default 1: off)\n"
    "  --seed          the sampler's seed (default: random; the summary line says it)\n"
    "  --threads       CPU threads (default 1: one token's ops are too small to share\n"
    "                  well; 0: all cores)\n"
    "  --device        cpu (default); cuda is refused: generation has no CUDA kernels yet\n"
    "  --tokenizer     decode with this tokenizer instead of the one the index of the\n"
    "                  checkpoint's data set (data.dir) names\n"
    "  --ignore-end-of-text  do not stop at the end-of-text token (benchmarks)\n"
    "It stops after --max-tokens, at the tokenizer's end-of-text token (the document\n"
    "separator), or when the prompt and the new text fill the model's context\n"
    "(model.context tokens; there is no sliding window). A prompt of context tokens or\n"
    "more is refused. The prompt is tokenized with the checkpoint's tokenizer.\n";

const std::vector<std::string> kOptions = {
    "--checkpoint", "--config",  "--run-dir", "--prompt",    "--prompt-file",
    "--max-tokens", "--temperature", "--top-k", "--top-p",   "--seed",
    "--threads",    "--device",  "--tokenizer", "--ignore-end-of-text", "--help"};

template <class T>
T number(const std::string& option, const std::string& text) {
  std::istringstream in(text);
  T value{};
  in >> value;
  if (in.fail() || !in.eof())
    throw cli::UsageError(option + " needs a number, not '" + text + "'");
  return value;
}

std::string read_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw cli::UsageError("--prompt-file: cannot read " +
                          fs::absolute(path).lexically_normal().string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int run_generate(const Args& args) {
  std::string checkpoint, config_file, run_dir, prompt_file, device = "cpu", tokenizer_name;
  std::optional<std::string> prompt;
  std::string value;
  infer::GenerateSettings settings;
  std::optional<uint64_t> seed;
  int threads = 1;  // bench/generate_vs_pytorch.sh: 2 threads decode slower than 1 here
  bool ignore_end_of_text = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (cli::take_value(args, i, "--checkpoint", checkpoint) ||
        cli::take_value(args, i, "--config", config_file) ||
        cli::take_value(args, i, "--run-dir", run_dir) ||
        cli::take_value(args, i, "--prompt-file", prompt_file) ||
        cli::take_value(args, i, "--device", device) ||
        cli::take_value(args, i, "--tokenizer", tokenizer_name))
      continue;
    if (cli::take_value(args, i, "--prompt", value)) {
      prompt = value;
    } else if (cli::take_value(args, i, "--max-tokens", value)) {
      settings.max_tokens = number<int64_t>("--max-tokens", value);
    } else if (cli::take_value(args, i, "--temperature", value)) {
      settings.sampling.temperature = number<double>("--temperature", value);
    } else if (cli::take_value(args, i, "--top-k", value)) {
      settings.sampling.top_k = number<int64_t>("--top-k", value);
    } else if (cli::take_value(args, i, "--top-p", value)) {
      settings.sampling.top_p = number<double>("--top-p", value);
    } else if (cli::take_value(args, i, "--seed", value)) {
      seed = number<uint64_t>("--seed", value);
    } else if (cli::take_value(args, i, "--threads", value)) {
      threads = number<int>("--threads", value);
    } else if (args[i] == "--ignore-end-of-text") {
      ignore_end_of_text = true;
    } else if (args[i].rfind("-", 0) == 0) {
      cli::unknown("option", args[i], kOptions);
    } else {
      throw cli::UsageError("unexpected argument '" + args[i] + "'");
    }
  }
  if (checkpoint.empty()) throw cli::UsageError("--checkpoint PATH|latest is required");
  if (prompt.has_value() == !prompt_file.empty())
    throw cli::UsageError("give the prompt with --prompt TEXT or --prompt-file FILE (one)");
  if (settings.max_tokens < 1) throw cli::UsageError("--max-tokens must be >= 1");
  if (threads < 0) throw cli::UsageError("--threads must be >= 0 (0: all cores)");
  if (device != "cpu" && device != "cuda")
    throw cli::UsageError("--device must be cpu or cuda, not '" + device + "'");
  settings.sampling.seed = seed.value_or(std::random_device{}());
  try {
    infer::check_sampling(settings.sampling);
  } catch (const std::invalid_argument& error) {
    throw cli::UsageError(error.what());
  }
  if (device == "cuda")
    throw backend::DeviceError(
        "--device cuda: text generation runs on the CPU in this build (the KV-cache "
        "attention, Backend::attention_forward_cached, has no CUDA kernel yet); use "
        "--device cpu");

  fs::path root;
  if (checkpoint == "latest") {
    if (config_file.empty() && run_dir.empty())
      throw cli::UsageError("--checkpoint latest needs --config FILE or --run-dir DIR: the "
                            "run whose newest checkpoint to use");
    if (!config_file.empty()) {
      const config::JobConfig job = config::load_config(config_file);
      root = checkpoint::checkpoint_root(job, run_dir.empty() ? fs::path(job.train.run_dir)
                                                              : fs::path(run_dir));
    } else {
      root = fs::path(run_dir) / "checkpoints";
    }
  }
  const infer::CheckpointModel model = infer::load_checkpoint_model(
      checkpoint, root, [](const std::string& error, const fs::path& next) {
        std::fprintf(stderr, "dseek generate: %s; trying the one before it, %s\n", error.c_str(),
                     next.string().c_str());
      });
  auto tokenizer = infer::open_model_tokenizer(model, tokenizer_name);
  settings.sample_below = tokenizer->vocab_size();
  settings.end_of_text = ignore_end_of_text ? -1 : static_cast<int32_t>(tokenizer->separator());

  const std::string text = prompt ? *prompt : read_prompt_file(prompt_file);
  std::vector<uint32_t> ids;
  tokenizer->encode(text, ids);
  if (ids.empty()) ids.push_back(tokenizer->separator());  // a new document
  const std::vector<int32_t> prompt_tokens(ids.begin(), ids.end());

  auto backend = backend::make_cpu_backend(threads);
  infer::Decoder decoder(model.shape, *backend, model.params);
  std::string piece;
  infer::GenerateResult result;
  try {
    result = infer::generate(decoder, prompt_tokens, settings, [&](int32_t token) {
      piece.clear();
      const uint32_t id = static_cast<uint32_t>(token);
      tokenizer->decode(std::span<const uint32_t>(&id, 1), piece);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
  } catch (const infer::PromptTooLong& error) {
    throw cli::UsageError(std::string(prompt ? "--prompt: " : "--prompt-file: ") + error.what());
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const double decode_rate =
      result.decode_seconds > 0 ? static_cast<double>(result.decode_steps) / result.decode_seconds
                                : 0.0;
  std::fprintf(stderr,
               "generate: %s (step %" PRId64 "), %zu prompt tokens, prefill %.1f ms, %zu new "
               "tokens, decode %.1f tokens/s, stop: %s, seed %" PRIu64 "\n",
               model.dir.string().c_str(), model.step, prompt_tokens.size(),
               result.prefill_seconds * 1e3, result.tokens.size(), decode_rate,
               infer::stop_reason_name(result.stop), settings.sampling.seed);
  return 0;
}

}  // namespace

const Command& generate_command() {
  static const Command command{
      "generate",
      "  generate --checkpoint PATH|latest --prompt TEXT [--max-tokens N] [--temperature T]\n"
      "                                 sample text from a trained model (KV cache, streamed)\n",
      kUsage, run_generate};
  return command;
}

}  // namespace dseek::tool
