// Reading back a field of a flat JSON object that util::JsonLine wrote (an event's
// fields): the value of one top-level key, as a number or a string. The metrics of a
// node (metrics/training_metrics.hpp) read the events this way; nested objects and
// arrays are skipped whole, so a key of the same name inside them is never taken.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dseek::util {

// The number at top-level key `key` of `object` ("{...}"): NaN for null (how JsonLine
// writes a non-finite number); nullopt when the key is absent, its value is not a
// number, or the text is not an object.
std::optional<double> json_number_field(std::string_view object, std::string_view key);

// The string at top-level key `key`, unescaped; nullopt as above.
std::optional<std::string> json_string_field(std::string_view object, std::string_view key);

}  // namespace dseek::util
