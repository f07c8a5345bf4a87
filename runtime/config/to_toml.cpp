// to_toml(): a JobConfig as TOML text with every key written out, in key-table order.
// load_config_text() reads it back to an equal config (floats use shortest round-trip
// digits), so `dseek config --check` output is itself a valid config file; and
// faults_inline_toml(), a fault list as the value of `--set faults=[...]`.
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

std::string faults_inline_toml(const std::vector<FaultSpec>& faults) {
  const FaultSpec defaults;
  std::string out = "[";
  for (const auto& fault : faults) {
    if (out.size() > 1) out += ", ";
    std::string table;
    for (const auto& key : schema::fault_keys()) {
      const std::string value = schema::format_value(key.get(fault));
      if (key.leaf() != "kind" && value == schema::format_value(key.get(defaults))) continue;
      table += (table.empty() ? "" : ", ") + std::string(key.leaf()) + " = " + value;
    }
    out += "{" + table + "}";
  }
  return out + "]";
}

}  // namespace dseek::config
