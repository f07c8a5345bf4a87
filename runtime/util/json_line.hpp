// A one-line JSON object builder for event logs and benchmark output. dseek only ever
// writes flat objects of numbers, strings, booleans and nested objects, so this is a
// few lines rather than a JSON library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dseek::util {

class JsonLine {
 public:
  JsonLine& add(std::string_view key, std::string_view value);
  JsonLine& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  JsonLine& add(std::string_view key, const std::string& value) { return add(key, std::string_view(value)); }
  JsonLine& add(std::string_view key, double value);
  JsonLine& add(std::string_view key, int64_t value);
  JsonLine& add(std::string_view key, uint64_t value);
  JsonLine& add(std::string_view key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonLine& add(std::string_view key, bool value);
  JsonLine& add_object(std::string_view key, const JsonLine& object);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(std::string_view name);
  std::string body_;
};

// `text` as a quoted JSON string with escapes.
std::string json_quote(std::string_view text);

// Ranks or ids as an event field lists them: "0,2,3" (`separator` between them).
std::string id_list(const std::vector<int>& ids, std::string_view separator = ",");

}  // namespace dseek::util
