// What the integration tests share to run dseek-node as a user would: the built
// binaries, a small prepared data set of real text, a tiny job's command line, and
// readers for the events.jsonl a run leaves behind.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dseek::testing {

std::string bin(const char* name);  // build/bin/<name>

// 3 MB of the Python standard library's sources, prepared once per test process.
const std::filesystem::path& prepared_text();

// dseek-node on config/single.toml shrunk to a model that trains in seconds, on
// prepared_text(), with plain progress lines; `extra` arguments come last (a later
// --set wins).
std::vector<std::string> tiny_job(const std::filesystem::path& run_dir, int steps,
                                  const std::vector<std::string>& extra = {});

std::vector<std::string> read_lines(const std::filesystem::path& file);
// The lines of `lines` whose event is `event`.
std::vector<std::string> events_named(const std::vector<std::string>& lines,
                                      const std::string& event);
// The events `event` of node 0 of the run in `run_dir`.
std::vector<std::string> node_events(const std::filesystem::path& run_dir,
                                     const std::string& event);
// A field of one JSON event line (REQUIREs that it is there).
double number_field(const std::string& line, const std::string& key);
std::string string_field(const std::string& line, const std::string& key);

}  // namespace dseek::testing
