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
    "       dseek config --check FILE [--set section.key=value ...]\n";

int usage(const char* problem) {
  std::fprintf(stderr, "dseek config: %s\n%s", problem, kUsage);
  return 2;
}

}  // namespace

int cmd_config(const Args& args) {
  if (args.size() == 1 && args[0] == "--describe") {
    std::fputs(config::describe_markdown().c_str(), stdout);
    return 0;
  }
  if (args.empty() || args[0] != "--check") {
    return usage(args.empty() ? "missing --describe or --check" : "unknown arguments");
  }
  if (args.size() < 2 || args[1].rfind("--", 0) == 0) return usage("--check needs a FILE");
  std::vector<std::string> overrides;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--set") {
      if (i + 1 == args.size()) return usage("--set needs section.key=value");
      overrides.push_back(args[++i]);
    } else if (args[i].rfind("--set=", 0) == 0) {
      overrides.push_back(args[i].substr(6));
    } else {
      return usage(("unexpected argument '" + args[i] + "'").c_str());
    }
  }
  try {
    config::JobConfig job = config::load_config(args[1], overrides);
    train::check_job(job);
    std::fputs(config::to_toml(job).c_str(), stdout);
  } catch (const config::ConfigError& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}

}  // namespace dseek::tool
