// The key table: one entry per configuration key (name, type, valid values, one-line
// description, accessor to its JobConfig field). It is the single description of the
// configuration that the loader, --set, validate(), describe_markdown() and to_toml()
// all walk, so a key is added in exactly one place. Defaults are not repeated here: they
// are the field initialisers of job_config.hpp, read through the accessors.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/config/job_config.hpp"
#include "runtime/config/prepare_config.hpp"

namespace dseek::config::schema {

enum class Type { Int, Float, String, Bool, Enum };

// A key's value, whatever its type; Enum keys hold a std::string.
using Value = std::variant<int64_t, double, std::string, bool>;

// Numeric bounds; an infinite bound is no bound. Open bounds exclude their end.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;
};

// What values a key accepts besides its type: a range (numbers) or a list (enums).
struct Constraint {
  Range range;
  std::vector<std::string_view> allowed;
};

Constraint any();
Constraint at_least(double lo);
Constraint above(double lo);
Constraint between(double lo, double hi);       // lo <= v <= hi
Constraint half_open(double lo, double hi);     // lo <= v < hi
Constraint open_closed(double lo, double hi);   // lo < v <= hi
Constraint one_of(std::vector<std::string_view> allowed);
// An enum field's (config/enums.hpp): its EnumNames are the allowed values.
Constraint names();

// The part of a key that does not depend on which struct holds it.
struct Spec {
  std::string_view name;  // "model.dim"; [[faults]] keys are named "faults.kind"
  Type type;
  Constraint constraint;
  std::string_view description;

  std::string_view section() const { return name.substr(0, name.find('.')); }
  std::string_view leaf() const { return name.substr(name.find('.') + 1); }
};

// Root is JobConfig for the sections and FaultSpec for one [[faults]] entry.
template <class Root>
struct Key : Spec {
  Value (*get)(const Root&);
  void (*set)(Root&, const Value&);
};

const std::vector<Key<JobConfig>>& job_keys();
const std::vector<Key<FaultSpec>>& fault_keys();
const std::vector<Key<PrepareConfig>>& prepare_keys();  // the [prepare] section's

struct Section {
  std::string_view name;  // "model", ..., "faults" (the array of tables) last
  std::string_view description;
};
const std::vector<Section>& sections();
bool is_section(std::string_view name);

template <class Root>
const Key<Root>* find(const std::vector<Key<Root>>& keys, std::string_view name) {
  for (const auto& key : keys)
    if (key.name == name) return &key;
  return nullptr;
}

// Why `value` is not acceptable for `spec` (range, allowed strings, finiteness), or
// nothing when it is. The value's type is assumed to match spec.type.
std::optional<std::string> check(const Spec& spec, const Value& value);

// A key must be given when its default is not a valid value (faults.kind).
template <class Root>
bool required(const Key<Root>& key) {
  return check(key, key.get(Root{})).has_value();
}

std::string_view type_name(Type type);
std::string format_value(const Value& value);  // as a TOML literal: 256, 0.001, "fp32"
std::string quote(std::string_view text);      // a TOML basic string
std::string describe_constraint(const Spec& spec);  // ">= 1", "fp32, bf16, fp8", ""

}  // namespace dseek::config::schema
