// The command-line conventions of every dseek program and subcommand, in one place
// (`dseek`, each `dseek <command>`, `dseek-node`):
//   --help / -h anywhere     the usage on stdout, exit 0
//   a mistake                "PROGRAM: what is wrong (did you mean '...'?)", the usage on
//                            stderr, exit 2 (exit_code::usage)
//   --version                the version and the build (version.hpp)
// A command's body throws UsageError for a mistake; run_command() does the rest.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dseek::cli {

using Args = std::vector<std::string>;

// A mistake on the command line; its what() is one line, without the program's name.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// " (did you mean 'launch'?)" when one of `known` is within two edits of `word`, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& known);

// Throws UsageError "unknown <what> '<word>'" with a suggestion from `known`; `what` is
// "option", "command", "subcommand", ...
[[noreturn]] void unknown(std::string_view what, std::string_view word,
                          const std::vector<std::string>& known);

// The value of option `name` at args[i] ("--name VALUE" or "--name=VALUE"), advancing i
// past it; nothing when args[i] is not that option. Throws UsageError when the value is
// missing.
bool take_value(const Args& args, size_t& i, std::string_view name, std::string& value);

// --help or -h among the arguments.
bool asks_for_help(const Args& args);

// What the exit statuses mean (exit_codes.hpp), for the end of a usage text.
std::string exit_status_help();

// The program as the user started it (argv[0], set by main), for commands to paste
// back; `fallback` until set.
void set_invoked_as(const char* argv0);
std::string invoked_as(std::string_view fallback);

// Runs body(args) under the conventions above. `program` names it in messages ("dseek
// launch"); `usage` is what --help prints and what follows a mistake.
int run_command(std::string_view program, std::string_view usage, const Args& args,
                const std::function<int(const Args&)>& body);

}  // namespace dseek::cli
