// Splits the byte stream of one child's stdout or stderr into whole lines, each with the
// node's prefix ("[node 3] "), for `dseek launch`. The launcher feeds it whatever a
// pipe read returned and writes the returned text with one write(), so lines of
// different nodes never interleave mid-line: a line is only emitted once it is complete.
//
// A carriage return ends a line like a newline does (a progress bar that redraws with
// \r becomes one line per update; \r\n is one line end, not two). A partial line is
// held until its end arrives, until the stream closes (flush()), or until it grows past
// a bound, so a child that never prints a newline cannot make the launcher hoard memory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dseek::tool::launch {

class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix, std::size_t max_line_bytes = 64 * 1024);

  // The complete lines in `bytes` (with what was held before), each prefixed and ending
  // in '\n'; "" when no line was completed.
  std::string feed(std::string_view bytes);

  // The held partial line, prefixed and ended with '\n' (the stream closed); "" if none.
  std::string flush();

 private:
  void end_line(std::string& out);

  std::string prefix_;
  std::size_t max_line_bytes_;
  std::string partial_;
  bool last_was_carriage_return_ = false;
};

}  // namespace dseek::tool::launch
