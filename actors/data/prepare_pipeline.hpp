// `dseek data prepare` as a supervised pipeline of actors (DESIGN.md, data preparation):
// decode -> clean -> dedup -> tokenize -> augment -> write, each a pool of actors under
// its supervisor, credits between them (pipeline_driver.hpp). It runs in an actor
// system of its own with options.workers scheduler threads (the writer has its own).
// The output (shards and index) is the same bytes for any number of workers; OUT also
// gets report.json (with timings). Throws DataError naming the file on any failure,
// and then leaves OUT empty. Progress, skipped inputs and the report go to `log`.
#pragma once

#include <ostream>

#include "runtime/data/prepare.hpp"

namespace dseek::actors {

data::PrepareSummary prepare_dataset(const data::PrepareOptions& options, std::ostream& log);

}  // namespace dseek::actors
