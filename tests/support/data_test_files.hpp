// What the data-preparation unit tests share: writing an input file (its folders made),
// and the message of the DataError an action throws.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "runtime/data/token_dataset.hpp"

namespace dseek::testing {

inline void write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
  REQUIRE(out.good());
}

// The DataError message of `action`, or "" if it did not throw one.
inline std::string data_error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const data::DataError& error) {
    return error.what();
  }
  return "";
}

}  // namespace dseek::testing
