// Implementation of json_line.hpp.
#include "runtime/util/json_line.hpp"

#include <cmath>
#include <cstdio>

namespace dseek::util {

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {  // 0x7f: TOML needs it too
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void JsonLine::key(std::string_view name) {
  if (!body_.empty()) body_ += ',';
  body_ += json_quote(name);
  body_ += ':';
}

JsonLine& JsonLine::add(std::string_view name, std::string_view value) {
  key(name);
  body_ += json_quote(value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view name, double value) {
  key(name);
  if (!std::isfinite(value)) {
    body_ += "null";  // JSON has no NaN or infinity
  } else {
    char text[32];
    std::snprintf(text, sizeof text, "%.16g", value);  // Unix time to the microsecond
    body_ += text;
  }
  return *this;
}

JsonLine& JsonLine::add(std::string_view name, int64_t value) {
  key(name);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view name, uint64_t value) {
  key(name);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view name, bool value) {
  key(name);
  body_ += value ? "true" : "false";
  return *this;
}

std::string id_list(const std::vector<int>& ids, std::string_view separator) {
  std::string list;
  for (int id : ids) {
    if (!list.empty()) list += separator;
    list += std::to_string(id);
  }
  return list;
}

JsonLine& JsonLine::add_object(std::string_view name, const JsonLine& object) {
  key(name);
  body_ += object.str();
  return *this;
}

}  // namespace dseek::util
