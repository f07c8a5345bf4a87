// to_toml(): a JobConfig as TOML text with every key written out, in key-table order.
// load_config_text() reads it back to an equal config (floats use shortest round-trip
// digits), so `dseek config --check` output is itself a valid config file.
#include <string>

#include "runtime/config/load.hpp"
#include "runtime/config/schema.hpp"

namespace dseek::config {

namespace {

template <class Root>
void write_keys(std::string& out, const Root& root, const std::vector<schema::Key<Root>>& keys,
                std::string_view section) {
  for (const auto& key : keys) {
    if (key.section() != section) continue;
    // The join secret stays out of every file and output this text goes to.
    if (key.name == "cluster.secret") continue;
    out += std::string(key.leaf()) + " = " + schema::format_value(key.get(root)) + "\n";
  }
}

}  // namespace

std::string to_toml(const JobConfig& config) {
  std::string out;
  for (const auto& section : schema::sections()) {
    if (section.name == "faults" || section.name == "prepare") continue;  // no job's keys
    if (!out.empty()) out += "\n";
    out += '[';
    out += section.name;
    out += "]\n";
    write_keys(out, config, schema::job_keys(), section.name);
  }
  for (const auto& fault : config.faults) {
    out += "\n[[faults]]\n";
    write_keys(out, fault, schema::fault_keys(), "faults");
  }
  return out;
}

}  // namespace dseek::config
