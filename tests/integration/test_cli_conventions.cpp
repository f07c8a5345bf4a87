// The command lines behave like the tools people know (apps/cli/usage.hpp): --help and
// -h on every command and subcommand print its usage and exit 0; an unknown command or
// option exits 2 with a "did you mean"; --version names the version, the commit and
// whether CUDA is in; a missing path is an error that names the absolute path.
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

ProcessResult run_dseek(std::vector<std::string> args) {
  args.insert(args.begin(), bin("dseek"));
  return run_process(args, 30s);
}

}  // namespace

TEST_CASE("the help options on every command and subcommand print its usage and exit 0",
          "[cli]") {
  const std::vector<std::vector<std::string>> commands = {
      {},           {"launch"},          {"config"},        {"data"},
      {"data", "prepare"}, {"data", "tokenize"}, {"data", "verify"}, {"data", "info"},
      {"ckpt"},     {"ckpt", "ls"},      {"ckpt", "inspect"}, {"ckpt", "verify"},
      {"ckpt", "export"}, {"ckpt", "import"}, {"bench"}, {"bench", "train"},
      {"bench", "allreduce"}, {"devices"}, {"generate"}, {"report"}, {"trace"}, {"trace", "merge"}};
  for (const auto& command : commands) {
    for (const char* flag : {"--help", "-h"}) {
      auto args = command;
      args.push_back(flag);
      const auto result = run_dseek(args);
      INFO("dseek " << (command.empty() ? "" : command[0] + " ") << flag << ":\n" << result.output);
      CHECK(result.exit_code == 0);
      CHECK_THAT(result.output, Contains("usage: dseek"));
    }
  }
  for (const char* flag : {"--help", "-h"}) {
    const auto node = run_process({bin("dseek-node"), flag}, 30s);
    INFO(node.output);
    CHECK(node.exit_code == 0);
    CHECK_THAT(node.output, Contains("usage: dseek-node --config FILE"));
    CHECK_THAT(node.output, Contains("exit status: 0 done"));
  }
  // The exit statuses are in the top usage.
  CHECK_THAT(run_dseek({"--help"}).output, Contains("3 a config, data, device or"));
}

TEST_CASE("unknown commands and options exit 2 with a suggestion", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"lanch"}, "unknown command 'lanch' (did you mean 'launch'?)"},
      {{"launch", "--nods", "2", "config/single.toml"}, "unknown option '--nods' (did you mean '--nodes'?)"},
      {{"ckpt", "lss", "x"}, "unknown subcommand 'lss' (did you mean 'ls'?)"},
      {{"data", "prepare", "--inptu", "x", "--output", "y"}, "(did you mean '--input'?)"},
      {{"data", "prpare"}, "(did you mean 'prepare'?)"},
      {{"config", "--chek", "x"}, "(did you mean '--check'?)"},
      {{"bench", "trian"}, "(did you mean 'train'?)"},
      {{"bench", "train", "--step", "3"}, "(did you mean '--steps'?)"},
      {{"devices", "--all"}, "unknown option '--all'"},
      {{"report", "--ouput", "x.html", "runs/x"}, "(did you mean '--output'?)"},
      {{"report"}, "a RUN_DIR is required"},
      {{"trace", "merj", "runs/x"}, "(did you mean 'merge'?)"},
      {{"generate", "--checkpoint", "x", "--promt", "a"}, "(did you mean '--prompt'?)"},
      {{"generate", "--checkpoint", "x", "--prompt", "a", "--top-p", "1.5"}, "--top-p must be in (0, 1]"},
      {{"ckpt", "export", "x", "--format", "onx", "--output", "y"}, "--format must be safetensors, onnx or hf"},
      {{}, "a command is required"}};
  for (const auto& c : cases) {
    const auto result = run_dseek(c.args);
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Contains(c.says));
    CHECK_THAT(result.output, Contains("usage: dseek"));
  }
  const auto node = run_process({bin("dseek-node"), "--confg", "x.toml"}, 30s);
  INFO(node.output);
  CHECK(node.exit_code == 2);
  CHECK_THAT(node.output, Contains("unknown option '--confg' (did you mean '--config'?)"));
  const auto no_config = run_process({bin("dseek-node")}, 30s);
  CHECK(no_config.exit_code == 2);
  CHECK_THAT(no_config.output, Contains("--config FILE is required"));
}

TEST_CASE("dseek and dseek-node print their version, commit and CUDA setting", "[cli]") {
  const std::regex version(R"(^(dseek|dseek-node) \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown), CUDA (on|off)\)\n$)");
  const auto tool = run_dseek({"--version"});
  INFO(tool.output);
  CHECK(tool.exit_code == 0);
  CHECK(std::regex_match(tool.output, version));
  const auto node = run_process({bin("dseek-node"), "--version"}, 30s);
  INFO(node.output);
  CHECK(node.exit_code == 0);
  CHECK(std::regex_match(node.output, version));
}

TEST_CASE("a missing path exits non-zero naming the absolute path it tried", "[cli]") {
  const auto ls = run_dseek({"ckpt", "ls", "/nonexistent/checkpoints"});
  INFO(ls.output);
  CHECK(ls.exit_code == 3);
  CHECK_THAT(ls.output, Contains("no such directory /nonexistent/checkpoints"));
  ScratchDir empty("cli-empty");
  const auto none = run_dseek({"ckpt", "ls", empty.path().string()});
  CHECK(none.exit_code == 0);  // a directory without checkpoints is an answer, not an error
  CHECK_THAT(none.output, Contains("no committed checkpoints under"));
  // A relative config path that does not exist: the message has the absolute one.
  const auto check = run_process(
      {"/bin/sh", "-c", "cd '" + empty.path().string() + "' && '" + bin("dseek") +
                            "' config --check nope/job.toml"},
      30s);
  INFO(check.output);
  CHECK(check.exit_code == 3);
  CHECK_THAT(check.output, Contains((empty.path() / "nope/job.toml").string() + "): no such file"));
}
