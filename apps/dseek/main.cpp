// `dseek`: the command-line tools around a dseek job. Dispatches to one subcommand
// (commands.hpp) under the conventions of apps/cli/usage.hpp.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/usage.hpp"
#include "cli/version.hpp"
#include "dseek/commands.hpp"
#include "runtime/util/exit_codes.hpp"
#include "runtime/util/failure_kind.hpp"

namespace {

using dseek::tool::Command;

const std::vector<const Command*>& commands() {
  using namespace dseek::tool;
  static const std::vector<const Command*> all = {&launch_command(), &config_command(),
                                                  &data_command(),   &bench_command(),
                                                  &devices_command(), &ckpt_command(),
                                                  &report_command(), &trace_command(),
                                                  &generate_command()};
  return all;
}

std::string top_usage() {
  std::string text = "usage: dseek <command> [args]   (dseek <command> --help: its usage)\n"
                     "       dseek --version\ncommands:\n";
  for (const Command* command : commands()) text += command->summary;
  return text + dseek::cli::exit_status_help();
}

}  // namespace

int main(int argc, char** argv) {
  const dseek::cli::Args args(argv + 1, argv + argc);
  dseek::cli::set_invoked_as(argv[0]);
  if (!args.empty() && args[0] == "--version") {
    std::fputs(dseek::cli::version_text("dseek").c_str(), stdout);
    return dseek::exit_code::ok;
  }
  const std::string usage = top_usage();
  if (args.empty() || args[0] == "--help" || args[0] == "-h")
    return dseek::cli::run_command("dseek", usage, args, [](const dseek::cli::Args&) -> int {
      throw dseek::cli::UsageError("a command is required");
    });
  for (const Command* command : commands()) {
    if (args[0] != command->name) continue;
    const std::string program = std::string("dseek ") + command->name;
    try {
      return dseek::cli::run_command(program, command->usage,
                                     dseek::cli::Args(args.begin() + 1, args.end()), command->run);
    } catch (const std::exception& error) {
      std::fflush(stdout);
      std::fprintf(stderr, "%s: %s\n", program.c_str(), dseek::util::describe_failure(error).c_str());
      return dseek::util::classify_failure(error).permanent ? dseek::exit_code::permanent
                                                            : dseek::exit_code::failed;
    }
  }
  std::vector<std::string> names;
  for (const Command* command : commands()) names.push_back(command->name);
  return dseek::cli::run_command("dseek", usage, {}, [&](const dseek::cli::Args&) -> int {
    dseek::cli::unknown(args[0].rfind("-", 0) == 0 ? "option" : "command", args[0], names);
  });
}
