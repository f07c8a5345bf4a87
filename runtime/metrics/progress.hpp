// What a person watching a training run sees: on a terminal, one progress bar line
// (step, loss, tokens/s, ETA) redrawn in place; otherwise a plain log line every
// log_every steps. Evaluations and the final summary are always plain lines.
#pragma once

#include "runtime/config/enums.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

namespace dseek::metrics {

enum class ProgressMode { bar, plain, off };

// "auto" means bar when `stream` is a terminal, plain otherwise.
ProgressMode resolve_progress_mode(config::Progress setting, std::FILE* stream);

class Progress {
 public:
  Progress(ProgressMode mode, int64_t total_steps, int64_t log_every, std::FILE* stream);

  void step(int64_t step, double loss, double lr, double tokens_per_s, double eta_seconds);
  void eval(int64_t step, double val_loss);
  void line(const std::string& text);  // any message, without breaking the bar

 private:
  void end_bar();
  ProgressMode mode_;
  int64_t total_steps_;
  int64_t log_every_;
  std::FILE* stream_;
  bool bar_drawn_ = false;
};

std::string format_duration(double seconds);

}  // namespace dseek::metrics
