// Implementation of progress.hpp.
#include "runtime/metrics/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace dseek::metrics {

ProgressMode resolve_progress_mode(config::Progress setting, std::FILE* stream) {
  if (setting == config::Progress::bar) return ProgressMode::bar;
  if (setting == config::Progress::plain) return ProgressMode::plain;
  if (setting == config::Progress::off) return ProgressMode::off;
  return ::isatty(::fileno(stream)) ? ProgressMode::bar : ProgressMode::plain;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::lround(seconds));
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(total / 3600),
                  static_cast<long long>(total % 3600 / 60));
  else if (total >= 60)
    std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  else
    std::snprintf(text, sizeof text, "%llds", static_cast<long long>(total));
  return text;
}

Progress::Progress(ProgressMode mode, int64_t total_steps, int64_t log_every, std::FILE* stream)
    : mode_(mode), total_steps_(std::max<int64_t>(total_steps, 1)),
      log_every_(std::max<int64_t>(log_every, 1)), stream_(stream) {}

void Progress::step(int64_t step, double loss, double lr, double tokens_per_s,
                    double eta_seconds) {
  const int64_t done = step + 1;
  if (mode_ == ProgressMode::bar) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * done / total_steps_);
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    std::fprintf(stream_, "\r\033[Kstep %lld/%lld [%s] loss %.4f | %.0f tok/s | ETA %s",
                 static_cast<long long>(done), static_cast<long long>(total_steps_),
                 bar.c_str(), loss, tokens_per_s, format_duration(eta_seconds).c_str());
    std::fflush(stream_);
    bar_drawn_ = true;
  } else if (mode_ == ProgressMode::plain && (done % log_every_ == 0 || done == total_steps_ || step == 0)) {
    std::fprintf(stream_, "step %lld/%lld loss %.4f lr %.3e tok/s %.0f eta %s\n",
                 static_cast<long long>(done), static_cast<long long>(total_steps_), loss, lr,
                 tokens_per_s, format_duration(eta_seconds).c_str());
    std::fflush(stream_);
  }
}

void Progress::end_bar() {
  if (bar_drawn_) {
    std::fputc('\n', stream_);
    bar_drawn_ = false;
  }
}

void Progress::eval(int64_t step, double val_loss) {
  if (mode_ == ProgressMode::off) return;
  end_bar();
  std::fprintf(stream_, "eval step %lld val_loss %.4f\n", static_cast<long long>(step + 1),
               val_loss);
  std::fflush(stream_);
}

void Progress::line(const std::string& text) {
  if (mode_ == ProgressMode::off) return;
  end_bar();
  std::fprintf(stream_, "%s\n", text.c_str());
  std::fflush(stream_);
}

}  // namespace dseek::metrics
