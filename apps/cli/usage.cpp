// Implementation of usage.hpp.
#include "cli/usage.hpp"

#include <cstdio>

#include "runtime/util/closest_word.hpp"
#include "runtime/util/exit_codes.hpp"

namespace dseek::cli {

std::string did_you_mean(std::string_view word, const std::vector<std::string>& known) {
  const auto best = util::closest_word(word, known);
  return best ? " (did you mean '" + *best + "'?)" : "";
}

void unknown(std::string_view what, std::string_view word, const std::vector<std::string>& known) {
  throw UsageError("unknown " + std::string(what) + " '" + std::string(word) + "'" +
                   did_you_mean(word, known));
}

bool take_value(const Args& args, size_t& i, std::string_view name, std::string& value) {
  const std::string& arg = args[i];
  const std::string prefix = std::string(name) + "=";
  if (arg.rfind(prefix, 0) == 0) {
    value = arg.substr(prefix.size());
    return true;
  }
  if (arg != name) return false;
  if (i + 1 >= args.size()) throw UsageError(std::string(name) + " needs a value");
  value = args[++i];
  return true;
}

bool asks_for_help(const Args& args) {
  for (const auto& arg : args)
    if (arg == "--help" || arg == "-h") return true;
  return false;
}

std::string exit_status_help() {
  using namespace exit_code;
  char text[640];
  std::snprintf(text, sizeof text,
                "exit status: %d done; %d failed, a restart may cure it (dseek launch and the\n"
                "  restart loops retry); %d a bad command line; %d a config, data, device or\n"
                "  checkpoint error (never retried); %d dseek launch --timeout; %d / %d stopped\n"
                "  by SIGINT / SIGTERM after the orderly stop\n",
                ok, failed, usage, permanent, timed_out, interrupted, terminated);
  return text;
}

namespace {
std::string g_invoked_as;
}  // namespace

void set_invoked_as(const char* argv0) { g_invoked_as = argv0 == nullptr ? "" : argv0; }

std::string invoked_as(std::string_view fallback) {
  return g_invoked_as.empty() ? std::string(fallback) : g_invoked_as;
}

int run_command(std::string_view program, std::string_view usage, const Args& args,
                const std::function<int(const Args&)>& body) {
  if (asks_for_help(args)) {
    std::fwrite(usage.data(), 1, usage.size(), stdout);
    return exit_code::ok;
  }
  try {
    return body(args);
  } catch (const UsageError& error) {
    std::fflush(stdout);
    std::fprintf(stderr, "%.*s: %s\n%.*s", static_cast<int>(program.size()), program.data(),
                 error.what(), static_cast<int>(usage.size()), usage.data());
    return exit_code::usage;
  }
}

}  // namespace dseek::cli
