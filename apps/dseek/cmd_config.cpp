// `dseek config`: prints the reference of every config key (--describe), or checks a
// config file with overrides and prints it fully resolved (--check FILE [--set k=v ...]).
#include <cstdio>
#include <string>
#include <vector>

#include "dseek/commands.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/check_job.hpp"

namespace dseek::tool {

namespace {

constexpr const char* kUsage =
    "usage: dseek config --describe\n"
    "       dseek config --check FILE [--set section.key=value ...]\n"
    "  --describe: every key, its type, default, range and meaning (config/REFERENCE.md)\n"
    "  --check: load FILE with the overrides, check it as dseek-node would, print it resolved\n"
    "  (a relative path in FILE is read against FILE's folder and printed absolute)\n";

const std::vector<std::string> kOptions = {"--describe", "--check", "--set", "--help"};

int run_config(const Args& args) {
  if (args.empty()) throw cli::UsageError("--describe or --check FILE is required");
  if (args[0] == "--describe") {
    if (args.size() > 1) throw cli::UsageError("--describe takes no arguments");
    std::fputs(config::describe_markdown().c_str(), stdout);
    return 0;
  }
  if (args[0] != "--check") cli::unknown("option", args[0], kOptions);
  if (args.size() < 2 || args[1].rfind("--", 0) == 0) throw cli::UsageError("--check needs a FILE");
  std::vector<std::string> overrides;
  for (size_t i = 2; i < args.size(); ++i) {
    std::string value;
    if (cli::take_value(args, i, "--set", value)) overrides.push_back(value);
    else if (args[i].rfind("-", 0) == 0) cli::unknown("option", args[i], kOptions);
    else throw cli::UsageError("unexpected argument '" + args[i] + "'");
  }
  config::JobConfig job = config::load_config(args[1], overrides);  // ConfigError: exit 3
  train::check_job(job);
  std::fputs(config::to_toml(job).c_str(), stdout);
  return 0;
}

}  // namespace

const Command& config_command() {
  static const Command command{
      "config",
      "  config --describe              print the reference of every config key\n"
      "  config --check FILE [--set k=v] validate a config, print it resolved\n",
      kUsage, run_config};
  return command;
}

}  // namespace dseek::tool
