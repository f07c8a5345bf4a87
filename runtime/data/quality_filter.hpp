// The clean stage's heuristic quality filters (CleanSettings): too short, too long, too
// many symbols or digits, too many repeated lines. Pure functions of one text.
#pragma once

#include <string_view>

#include "runtime/data/clean_settings.hpp"
#include "runtime/data/piece.hpp"

namespace dseek::data {

// The first filter `text` fails (in the order of DropReason), else DropReason::kept.
// An empty text is DropReason::empty.
DropReason quality_verdict(std::string_view text, const CleanSettings& settings);

}  // namespace dseek::data
