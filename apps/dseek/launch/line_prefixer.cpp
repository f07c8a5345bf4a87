// Implementation of line_prefixer.hpp.
#include "dseek/launch/line_prefixer.hpp"

#include <utility>

namespace dseek::tool::launch {

LinePrefixer::LinePrefixer(std::string prefix, std::size_t max_line_bytes)
    : prefix_(std::move(prefix)), max_line_bytes_(max_line_bytes) {}

void LinePrefixer::end_line(std::string& out) {
  out += prefix_;
  out += partial_;
  out += '\n';
  partial_.clear();
}

std::string LinePrefixer::feed(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    if (c == '\n') {
      // The \n of a \r\n: the \r already ended this line.
      if (!last_was_carriage_return_) end_line(out);
    } else if (c == '\r') {
      // Consecutive \r (or a \r right after a line end) would only add empty lines.
      if (!partial_.empty()) end_line(out);
    } else {
      partial_ += c;
      if (partial_.size() >= max_line_bytes_) end_line(out);
    }
    last_was_carriage_return_ = (c == '\r');
  }
  return out;
}

std::string LinePrefixer::flush() {
  std::string out;
  if (!partial_.empty()) end_line(out);
  last_was_carriage_return_ = false;
  return out;
}

}  // namespace dseek::tool::launch
