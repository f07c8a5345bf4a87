// What `dseek launch` writes to its terminal. Plain mode (stdout is not a terminal, or
// metrics.progress is plain/off): every node's lines pass through as they come, prefixed
// "[node K] ". Bar mode (a terminal and metrics.progress auto or bar): one progress bar
// for the job at the bottom of stdout, drawn from the coordinator node's step lines,
// which the launcher has that node print every step ("step 5/300 loss 2.1 lr ... tok/s
// 812 eta 1m40s"; node_command_line()); the coordinator node's other lines
// (evaluations, checkpoints, its summary) print above the bar; the other nodes run with
// metrics.progress = "off", so what they print (messages, warnings, errors) is worth a
// line above the bar too.
#pragma once

#include <string>
#include <string_view>

namespace dseek::tool::launch {

class JobConsole {
 public:
  JobConsole(bool bar, int bar_node) : bar_(bar), bar_node_(bar_node) {}

  // Complete lines (each "[node K] ...\n", from LinePrefixer) that node `node_id` wrote
  // to its stdout (`is_stdout`) or stderr.
  void node_output(int node_id, bool is_stdout, std::string_view lines);
  // A line of the launcher's own (stderr), ending in '\n'.
  void message(std::string_view line);
  // Ends the bar's line (before the last messages and the exit).
  void finish();

  // The bar for a step line's text without its node prefix ("step 5/300 loss ..."), or
  // "" when it is not a step line. Public for the tests.
  static std::string bar_for(std::string_view step_line);

 private:
  void write_above(int fd, std::string_view text);
  void draw();

  bool bar_;
  int bar_node_;
  std::string bar_text_;  // the bar as drawn last; "" before the first step
};

}  // namespace dseek::tool::launch
