// What the actors of one `dseek data prepare` share: the settings, the input listing,
// the tokenizer, and the state of the in-order stages (dedup, write), which lives here
// and not in their actors so that a restarted actor takes over where its predecessor
// was (after undoing the piece it was in the middle of). Only one actor of each
// in-order stage runs at a time, so their state needs no lock.
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "runtime/data/dataset_builder.hpp"
#include "runtime/data/fim.hpp"
#include "runtime/data/minhash.hpp"
#include "runtime/data/piece_cache.hpp"
#include "runtime/data/piece_stages.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/source_files.hpp"
#include "runtime/data/tokenizer.hpp"

namespace dseek::actors {

struct prepare_context {
  data::PrepareOptions options;
  data::InputOptions input;  // options.input_options for this tokenizer
  data::SourceListing listing;
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::optional<data::MinHasher> hasher;
  data::FimTokens fim_tokens;
  std::optional<data::DedupStage> dedup;
  std::optional<data::DedupStage::Mark> dedup_pending;  // a piece half applied
  std::optional<data::DatasetBuilder> builder;
  std::optional<data::DatasetBuilder::Mark> write_pending;
  // --cache: the files' chain keys, which of them the cache holds, and the entry the
  // writer is filling (dropped, and that file not cached, when a writer crashed).
  std::vector<std::string> cache_keys;
  std::vector<bool> cache_hit;
  std::unique_ptr<data::CacheEntryWriter> cache_entry;
  bool cache_skip = false;
  data::PrepareSummary pipeline;  // the driver's figures (pieces, peaks, restarts)
  // The injected crash (options.faults): pieces taken by the stage, and whether it fired.
  std::array<std::atomic<uint64_t>, data::kPrepareStages> taken{};
  std::atomic<bool> crashed{false};
};

using context_ptr = std::shared_ptr<prepare_context>;

}  // namespace dseek::actors
