// Implementation of job_console.hpp.
#include "dseek/launch/job_console.hpp"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <string>

namespace dseek::tool::launch {

namespace {

// Writes all of `text`; a closed reader (EPIPE, SIGPIPE is ignored) loses the output
// but must not stop the launcher from looking after its children.
void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {  // an inherited non-blocking stdout: wait until it drains
        pollfd writable{fd, POLLOUT, 0};
        ::poll(&writable, 1, 1000);
        continue;
      }
      return;
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
}

constexpr std::string_view kClearLine = "\r\033[K";

// "[node 3] step ..." -> 3 and the text after the prefix; -1 when there is no prefix.
int node_of(std::string_view line, std::string_view& rest) {
  if (line.rfind("[node ", 0) != 0) return -1;
  const size_t close = line.find("] ");
  if (close == std::string_view::npos) return -1;
  rest = line.substr(close + 2);
  try {
    return std::stoi(std::string(line.substr(6, close - 6)));
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

std::string JobConsole::bar_for(std::string_view step_line) {
  // Progress's plain step line (runtime/metrics/progress.cpp).
  static const std::regex step(
      R"(^step (\d+)/(\d+) loss (\S+) lr \S+ tok/s (\S+) eta (\S+)\s*$)");
  std::cmatch match;
  if (!std::regex_match(step_line.data(), step_line.data() + step_line.size(), match, step))
    return "";
  const long long done = std::stoll(match[1].str());
  const long long total = std::max(1LL, std::stoll(match[2].str()));
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * std::min(done, total) / total);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  return "job: step " + match[1].str() + "/" + match[2].str() + " [" + bar + "] loss " +
         match[3].str() + " | " + match[4].str() + " tok/s | ETA " + match[5].str();
}

void JobConsole::draw() {
  if (!bar_text_.empty()) write_all(1, std::string(kClearLine) + bar_text_);
}

void JobConsole::write_above(int fd, std::string_view text) {
  if (text.empty()) return;
  if (!bar_text_.empty()) write_all(1, kClearLine);
  write_all(fd, text);
  draw();
}

void JobConsole::node_output(int node_id, bool is_stdout, std::string_view lines) {
  if (lines.empty()) return;
  const int fd = is_stdout ? 1 : 2;
  if (!bar_) {
    write_all(fd, lines);
    return;
  }
  if (node_id != bar_node_) {  // its progress is off: what it says is worth a line
    write_above(fd, lines);
    return;
  }
  std::string above;
  bool moved = false;  // the bar changed: redraw it
  while (!lines.empty()) {
    const size_t end = lines.find('\n');
    const std::string_view line = lines.substr(0, end == std::string_view::npos ? lines.size() : end + 1);
    lines.remove_prefix(line.size());
    std::string_view rest;
    const std::string bar = node_of(line, rest) >= 0 ? bar_for(rest) : "";
    if (bar.empty()) {
      above += line;
    } else {
      moved = bar != bar_text_;
      bar_text_ = bar;
    }
  }
  if (!above.empty()) write_above(fd, above);
  else if (moved) draw();
}

void JobConsole::message(std::string_view line) {
  if (bar_) write_above(2, line);
  else write_all(2, line);
}

void JobConsole::finish() {
  if (bar_ && !bar_text_.empty()) write_all(1, "\n");
  bar_text_.clear();
}

}  // namespace dseek::tool::launch
