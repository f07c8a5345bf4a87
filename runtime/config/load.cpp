// Reading a job configuration: TOML text or file -> JobConfig, and `--set` overrides.
// Every value goes through assign(), which checks it against the key table, so a file
// and an override are held to the same rules and their errors read the same.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include <toml++/toml.h>

#include "runtime/config/load.hpp"
#include "runtime/config/prepare_config.hpp"
#include "runtime/config/schema.hpp"
#include "runtime/util/closest_word.hpp"

namespace dseek::config {

namespace {

[[noreturn]] void fail(std::string message) { throw ConfigError(std::move(message)); }

// Where values come from, for messages: a file has positions ("x.toml:3:7"), an
// override does not and is named instead ("--set model.dim=abc").
struct Origin {
  std::string_view name;
  bool has_positions;
  // The folder of the config file (absolute) that relative paths in it are read
  // against; empty for overrides and for text that is not a file.
  std::filesystem::path base_dir = {};

  std::string at(const toml::source_region& region) const {
    std::string out(name);
    if (has_positions && region.begin.line > 0) {
      out += ':';
      out += std::to_string(region.begin.line);
      out += ':';
      out += std::to_string(region.begin.column);
    }
    return out;
  }
};

std::string describe_node(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string " + schema::quote(node.as_string()->get());
    case toml::node_type::integer:
      return "integer " + std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point:
      return "float " + schema::format_value(node.as_floating_point()->get());
    case toml::node_type::boolean:
      return std::string("boolean ") + (node.as_boolean()->get() ? "true" : "false");
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

// The node as the key's type; an integer literal is a fine float, nothing else converts.
std::optional<schema::Value> to_value(schema::Type type, const toml::node& node) {
  switch (type) {
    case schema::Type::Int:
      if (const auto* integer = node.as_integer()) return integer->get();
      break;
    case schema::Type::Float:
      if (const auto* number = node.as_floating_point()) return number->get();
      if (const auto* integer = node.as_integer()) return static_cast<double>(integer->get());
      break;
    case schema::Type::String:
    case schema::Type::Enum:
      if (const auto* text = node.as_string()) return text->get();
      break;
    case schema::Type::Bool:
      if (const auto* flag = node.as_boolean()) return flag->get();
      break;
  }
  return std::nullopt;
}

std::string expected(const schema::Spec& spec) {
  switch (spec.type) {
    case schema::Type::Int: return "an integer";
    case schema::Type::Float: return "a number";
    case schema::Type::String: return "a string";
    case schema::Type::Bool: return "a boolean";
    case schema::Type::Enum: return "one of " + schema::describe_constraint(spec);
  }
  return "?";
}

// `shown` is the key as the user should read it: "model.dim", or "faults[2].kind".
template <class Root>
void assign(const schema::Key<Root>& key, const std::string& shown, const toml::node& node,
            const Origin& origin, Root& root) {
  auto value = to_value(key.type, node);
  if (!value) {
    fail(origin.at(node.source()) + ": " + shown + ": expected " + expected(key) + ", got " +
         describe_node(node));
  }
  if (auto problem = schema::check(key, *value)) {
    fail(origin.at(node.source()) + ": " + shown + ": " + *problem);
  }
  key.set(root, *value);
}

// " (did you mean model.dim?)" for a near miss, else nothing: typos are the usual cause.
template <class Root>
std::string suggestion(std::string_view name, const std::vector<schema::Key<Root>>& keys) {
  std::vector<std::string> names;
  for (const auto& key : keys) names.emplace_back(key.name);
  const auto best = util::closest_word(name, names);
  return best ? " (did you mean " + *best + "?)" : "";
}

std::string section_list() {
  std::string out;
  for (const auto& section : schema::sections()) {
    if (!out.empty()) out += ", ";
    out += section.name;
  }
  return out;
}

// toml::table iterates in key order; report problems in the order the user wrote them.
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, node] : table) entries.emplace_back(&key, &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& pa = a.first->source().begin;
    const auto& pb = b.first->source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  });
  return entries;
}

// [[faults]] from a file, or `--set faults=[{kind = "kill", step = 5}]`: replaces the list.
void load_faults(const toml::node& node, const Origin& origin, std::vector<FaultSpec>& faults) {
  const auto* array = node.as_array();
  if (array == nullptr || !(array->empty() || array->is_array_of_tables())) {
    fail(origin.at(node.source()) + ": faults: expected an array of tables ([[faults]]), got " +
         describe_node(node));
  }
  faults.clear();
  for (size_t index = 0; index < array->size(); ++index) {
    const auto& table = *array->get(index)->as_table();
    std::string prefix = "faults[" + std::to_string(index) + "].";
    FaultSpec fault;
    for (const auto& [key, value] : in_file_order(table)) {
      std::string name = "faults." + std::string(key->str());
      std::string shown = prefix + std::string(key->str());
      const auto* spec = schema::find(schema::fault_keys(), name);
      if (spec == nullptr) {
        fail(origin.at(key->source()) + ": " + shown + ": unknown key" +
             suggestion(name, schema::fault_keys()));
      }
      assign(*spec, shown, *value, origin, fault);
    }
    for (const auto& spec : schema::fault_keys()) {
      if (schema::required(spec) && !table.contains(spec.leaf())) {
        fail(origin.at(table.source()) + ": " + prefix + std::string(spec.leaf()) +
             ": missing, expected " + expected(spec));
      }
    }
    faults.push_back(std::move(fault));
  }
}

// A relative path written in a config file means relative to the file's folder, so a
// config works from whatever directory it is started in ("latest" is no path).
void resolve_path(const std::string& name, const Origin& origin, JobConfig& config) {
  if (origin.base_dir.empty() || !is_path_key(name)) return;
  const auto* key = schema::find(schema::job_keys(), name);
  const std::string value = std::get<std::string>(key->get(config));
  if (value.empty() || (name == "checkpoint.resume" && value == "latest")) return;
  const std::filesystem::path path(value);
  if (path.is_absolute()) return;
  key->set(config, (origin.base_dir / path).lexically_normal().string());
}

// prepare.input and prepare.cache, as resolve_path() does for the job's paths.
void resolve_prepare_path(const std::string& name, const Origin& origin, PrepareConfig& prepare) {
  if (origin.base_dir.empty() || (name != "prepare.input" && name != "prepare.cache")) return;
  std::string& value = name == "prepare.input" ? prepare.input : prepare.cache;
  if (value.empty() || std::filesystem::path(value).is_absolute()) return;
  value = (origin.base_dir / value).lexically_normal().string();
}

// The [prepare] section (prepare_config.hpp): its keys, by the same rules as the job's.
void load_prepare(const toml::node& node, const Origin& origin, PrepareConfig& prepare) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    fail(origin.at(node.source()) + ": prepare: expected a table ([prepare]), got " +
         describe_node(node));
  }
  for (const auto& [key, value] : in_file_order(*table)) {
    std::string name = "prepare." + std::string(key->str());
    const auto* spec = schema::find(schema::prepare_keys(), name);
    if (spec == nullptr) {
      fail(origin.at(key->source()) + ": " + name + ": unknown key" +
           suggestion(name, schema::prepare_keys()));
    }
    assign(*spec, name, *value, origin, prepare);
    resolve_prepare_path(name, origin, prepare);
  }
}

// The relations of the [prepare] section that no key's range says.
void validate_prepare(const PrepareConfig& prepare, const std::string& source) {
  if (prepare.window == 1) {
    fail(source + ": prepare.window (1) must be 0 (4 per worker) or at least 2: one credit is "
                  "kept for the lowest file not fully read");
  }
  if (prepare.jsonl_field.empty()) {
    fail(source + ": prepare.jsonl_field must name the text field of a JSON Lines record");
  }
}

// The section [prepare] is read into `prepare`, or only checked when that is null (a job
// that trains leaves it alone, but a typo in it is an error everywhere).
void load_table(const toml::table& root, const Origin& origin, JobConfig& config,
                PrepareConfig* prepare) {
  for (const auto& [section_key, section_node] : in_file_order(root)) {
    std::string section(section_key->str());
    if (section == "faults") {
      load_faults(*section_node, origin, config.faults);
      continue;
    }
    if (section == "prepare") {
      PrepareConfig checked;
      load_prepare(*section_node, origin, prepare != nullptr ? *prepare : checked);
      continue;
    }
    if (!schema::is_section(section)) {
      fail(origin.at(section_key->source()) + ": [" + section +
           "]: unknown section, expected one of " + section_list());
    }
    const auto* table = section_node->as_table();
    if (table == nullptr) {
      fail(origin.at(section_node->source()) + ": " + section + ": expected a table ([" +
           section + "]), got " + describe_node(*section_node));
    }
    for (const auto& [key, value] : in_file_order(*table)) {
      std::string name = section + "." + std::string(key->str());
      const auto* spec = schema::find(schema::job_keys(), name);
      if (spec == nullptr) {
        fail(origin.at(key->source()) + ": " + name + ": unknown key" +
             suggestion(name, schema::job_keys()));
      }
      assign(*spec, name, *value, origin, config);
      resolve_path(name, origin, config);
    }
  }
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// The override's value read as TOML ("v = <text>"), or nothing when it is not one value.
std::optional<toml::table> parse_value(std::string_view text) {
  try {
    toml::table table = toml::parse("v = " + std::string(text));
    if (table.size() == 1 && table.contains("v")) return table;
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
}

}  // namespace

JobConfig default_config() {
  JobConfig config;
  config.source = "defaults";
  return config;
}

namespace {

void apply_prepare_override(PrepareConfig& prepare, std::string_view assignment);

// `prepare`: read [prepare] into it and take the overrides of prepare.* keys (else
// those are unknown keys, as for a job).
JobConfig load_text(std::string_view toml_text, std::string_view source_name,
                    const std::filesystem::path& base_dir,
                    const std::vector<std::string>& overrides, PrepareConfig* prepare = nullptr) {
  JobConfig config = default_config();
  config.source = std::string(source_name);
  Origin origin{source_name, true, base_dir};
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& error) {
    fail(origin.at(error.source()) + ": " + std::string(error.description()));
  }
  load_table(root, origin, config, prepare);
  for (const auto& assignment : overrides) {
    if (prepare != nullptr && trim(assignment).rfind("prepare.", 0) == 0)
      apply_prepare_override(*prepare, assignment);
    else
      apply_override(config, assignment);
  }
  validate(config);
  if (prepare != nullptr) validate_prepare(*prepare, std::string(source_name));
  return config;
}

}  // namespace

const std::vector<std::string_view>& path_keys() {
  static const std::vector<std::string_view> keys = {
      "train.run_dir",  "data.dir",         "checkpoint.dir", "checkpoint.resume",
      "cluster.tls_ca", "cluster.tls_cert", "cluster.tls_key", "metrics.baseline_run"};
  return keys;
}

bool is_path_key(std::string_view name) {
  const auto& keys = path_keys();
  return std::find(keys.begin(), keys.end(), name) != keys.end();
}

namespace {

// A config file's text and its folder (absolute), or a ConfigError naming it.
std::pair<std::string, std::filesystem::path> read_config_file(const std::filesystem::path& file) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(file, error).lexically_normal();
  const std::string tried = file.is_absolute() || error ? file.string()
                                                        : file.string() + " (" + absolute.string() + ")";
  if (!std::filesystem::exists(file, error)) fail(tried + ": no such file");
  if (std::filesystem::is_directory(file, error)) fail(tried + ": is a directory");
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(tried + ": cannot read the file");
  // (operator<< of an empty stream buffer sets failbit: an empty file read as unreadable)
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) fail(tried + ": cannot read the file");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    fail(tried + ": the file is empty: a job config needs at least its data and model "
                 "(config/single.toml is a complete one)");
  return {std::move(text), absolute.parent_path()};
}

}  // namespace

JobConfig load_config(const std::filesystem::path& file,
                      const std::vector<std::string>& overrides) {
  const auto [text, folder] = read_config_file(file);
  return load_text(text, file.string(), folder, overrides);
}

PrepareJob load_prepare_job(const std::filesystem::path& file,
                            const std::vector<std::string>& overrides) {
  PrepareJob loaded;
  const auto [text, folder] = read_config_file(file);
  loaded.job = load_text(text, file.string(), folder, overrides, &loaded.prepare);
  return loaded;
}

PrepareJob load_prepare_job_text(std::string_view toml_text, std::string_view source_name,
                                 const std::vector<std::string>& overrides) {
  PrepareJob loaded;
  loaded.job = load_text(toml_text, source_name, {}, overrides, &loaded.prepare);
  return loaded;
}

JobConfig load_config_text(std::string_view toml_text, std::string_view source_name,
                           const std::vector<std::string>& overrides) {
  return load_text(toml_text, source_name, {}, overrides);
}

std::set<std::string> keys_set_by(const std::filesystem::path& file,
                                  const std::vector<std::string>& overrides) {
  std::set<std::string> keys;
  for (const auto& assignment : overrides) {
    const std::string_view text(assignment);
    keys.insert(std::string(trim(text.substr(0, text.find('=')))));
  }
  try {
    const toml::table root = toml::parse_file(file.string());
    for (auto&& [section, node] : root) {
      if (const auto* table = node.as_table())
        for (auto&& [key, value] : *table)
          keys.insert(std::string(section.str()) + "." + std::string(key.str()));
      else
        keys.insert(std::string(section.str()));  // faults
    }
  } catch (const std::exception&) {
  }
  return keys;
}

namespace {

// One "prepare.key=value" override, as apply_override() does a job's.
void apply_prepare_override(PrepareConfig& prepare, std::string_view assignment) {
  std::string context = "--set " + std::string(assignment);
  Origin origin{context, false};
  const auto equals = assignment.find('=');
  if (equals == std::string_view::npos) fail(context + ": expected section.key=value");
  std::string name(trim(assignment.substr(0, equals)));
  std::string_view text = trim(assignment.substr(equals + 1));
  const auto* key = schema::find(schema::prepare_keys(), name);
  if (key == nullptr) {
    fail(context + ": " + name + ": unknown key" + suggestion(name, schema::prepare_keys()));
  }
  auto parsed = parse_value(text);
  toml::value<std::string> raw{std::string(text)};
  const toml::node* node = parsed ? parsed->get("v") : nullptr;
  if (node == nullptr || (key->type == schema::Type::String && !node->is_string())) node = &raw;
  assign(*key, name, *node, origin, prepare);
}

}  // namespace

void apply_override(JobConfig& config, std::string_view assignment) {
  std::string context = "--set " + std::string(assignment);
  Origin origin{context, false};
  auto equals = assignment.find('=');
  if (equals == std::string_view::npos) fail(context + ": expected section.key=value");
  std::string name(trim(assignment.substr(0, equals)));
  std::string_view text = trim(assignment.substr(equals + 1));

  auto parsed = parse_value(text);
  if (name == "faults") {
    if (!parsed) fail(context + ": faults: expected an array of tables, e.g. [{kind = \"kill\"}]");
    load_faults(*parsed->get("v"), origin, config.faults);
    return;
  }
  const auto* key = schema::find(schema::job_keys(), name);
  if (key == nullptr) {
    fail(context + ": " + name + ": unknown key" + suggestion(name, schema::job_keys()));
  }
  // A string key takes the text as written unless it was a quoted TOML string, so that
  // `--set data.dir=out/2024` or `--set train.run_dir=123` mean what they say.
  toml::value<std::string> raw{std::string(text)};
  const toml::node* node = parsed ? parsed->get("v") : nullptr;
  bool wants_string = key->type == schema::Type::String || key->type == schema::Type::Enum;
  if (node == nullptr || (wants_string && !node->is_string())) node = &raw;
  assign(*key, name, *node, origin, config);
}

}  // namespace dseek::config
