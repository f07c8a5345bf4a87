// `dseek data prepare` as a supervised pipeline of actors (DESIGN.md, data preparation):
// decode -> clean -> dedup -> tokenize -> augment -> write, each a pool of actors under
// its supervisor, credits between them (pipeline_driver.hpp). It runs in an actor
// system of its own with options.workers scheduler threads (the writer has its own).
// The output (shards and index) is the same bytes for any number of workers; OUT also
// gets report.json (with timings). Throws DataError naming the file on any failure,
// and then leaves OUT empty. Progress, skipped inputs and the report go to `log`.
#pragma once

#include <chrono>
#include <filesystem>
#include <ostream>
#include <string>

#include "actors/data/prepare_context.hpp"
#include "runtime/data/prepare.hpp"

namespace dseek::actors {

// On one node; options.nodes > 1 goes to prepare_on_nodes (prepare_nodes.hpp).
data::PrepareSummary prepare_dataset(const data::PrepareOptions& options, std::ostream& log);

// The pieces both share. The settings checked and completed (workers, window), the
// listing under the normalized `input` (set), the tokenizer: a context without dedup
// and builder, which the caller adds.
context_ptr make_prepare_context(const data::PrepareOptions& options,
                                 std::filesystem::path& input, std::ostream& log);
// Runs the actors; "" when every piece was written, else why not.
std::string run_pipeline(const context_ptr& context, std::ostream& log);
// The pipeline's figures into `summary` (the report's), and the time since `start`.
void finish_summary(data::PrepareSummary& summary, const prepare_context& context,
                    uint64_t cached, std::chrono::steady_clock::time_point start);

}  // namespace dseek::actors
