// Near dedup partitioned by LSH band (see band_partition.hpp). Files, little-endian:
//   <key>.minhash:  magic, u32 permutations, u64 documents, per document (by ordinal)
//                   u8 has-signature, permutations x u32 (zeros without one)
//   near-<p>.list:  magic, per document with candidates: u64 place, u32 count,
//                   count x u64 place (ascending); a place is packed_position's
#include "runtime/data/band_partition.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "runtime/data/minhash.hpp"
#include "runtime/data/part_records.hpp"
#include "runtime/data/piece_cache.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMinhashMagic = "dseek prepare minhash 1\n";
constexpr std::string_view kNearMagic = "dseek prepare near candidates 1\n";
constexpr size_t kMinhashHead = kMinhashMagic.size() + sizeof(uint32_t) + sizeof(uint64_t);
constexpr size_t kOpenFiles = 32;  // signature files node 0 keeps open at once

fs::path signatures_path(const fs::path& parts, const std::string& key) {
  return parts / (key + ".minhash");
}

// A unit's .minhash, read record by record.
struct SignatureFileReader {
  fs::path path;
  std::ifstream in;
  uint64_t left = 0;
  SignatureFileReader(const fs::path& parts, const std::string& key, uint32_t permutations)
      : path(signatures_path(parts, key)), in(path, std::ios::binary) {
    parts::check_magic(in, path, kMinhashMagic);
    uint32_t theirs = 0;
    if (!parts::get(in, theirs) || theirs != permutations || !parts::get(in, left)) {
      throw DataError("damaged " + path.string() + ": rerun the nodes");
    }
  }
  // The next document's signature; false after the last. `has`: whether it has one.
  bool next(bool& has, std::vector<uint32_t>& signature) {
    if (left == 0) return false;
    uint8_t flag = 0;
    if (!parts::get(in, flag) ||
        !in.read(reinterpret_cast<char*>(signature.data()),
                 static_cast<std::streamsize>(signature.size() * sizeof(uint32_t)))) {
      throw DataError("damaged " + path.string() + ": rerun the nodes");
    }
    has = flag != 0;
    --left;
    return true;
  }
};

}  // namespace

void write_unit_signatures(const fs::path& parts, const std::string& key,
                           uint32_t permutations) {
  const fs::path path = signatures_path(parts, key);
  std::error_code error;
  if (fs::is_regular_file(path, error)) return;
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out.write(kMinhashMagic.data(), static_cast<std::streamsize>(kMinhashMagic.size()));
  parts::put<uint32_t>(out, permutations);
  parts::put<uint64_t>(out, 0);  // the count, written at the end
  const std::vector<uint32_t> none(permutations, 0);
  uint64_t documents = 0;
  CacheEntryReader reader(parts, key);
  for (bool last = false; !last;) {
    const Piece piece = reader.next();
    for (const PieceDocument& document : piece.documents) {
      const bool passed = (document.hash_low | document.hash_high) != 0;
      const bool has = passed && !document.signature.empty();
      if (has && document.signature.size() != permutations) {
        throw DataError("the part " + key + " has a signature of " +
                        std::to_string(document.signature.size()) + " permutations, not " +
                        std::to_string(permutations) + ": rerun the nodes");
      }
      parts::put<uint8_t>(out, has ? 1 : 0);
      const std::vector<uint32_t>& values = has ? document.signature : none;
      out.write(reinterpret_cast<const char*>(values.data()),
                static_cast<std::streamsize>(values.size() * sizeof(uint32_t)));
      ++documents;
    }
    last = piece.last;
  }
  out.seekp(static_cast<std::streamoff>(kMinhashMagic.size() + sizeof(uint32_t)));
  parts::put<uint64_t>(out, documents);
  parts::commit(out, tmp, path);
}

uint64_t packed_position(const DocPosition& at) {
  if (at.unit >= (uint64_t{1} << 32) || at.ordinal >= (uint64_t{1} << 32)) {
    throw DataError("more than 2^32 units of work or documents in one (near dedup on nodes)");
  }
  return at.unit << 32 | at.ordinal;
}

DocPosition unpacked_position(uint64_t packed) { return {packed >> 32, packed & 0xffffffffull}; }

std::vector<uint32_t> owned_bands(uint32_t bands, uint32_t node, uint32_t nodes) {
  std::vector<uint32_t> owned;
  for (uint32_t band = node; band < bands; band += nodes) owned.push_back(band);
  return owned;
}

uint64_t decide_bands(const fs::path& parts, const std::vector<std::string>& keys,
                      const std::vector<uint32_t>& unit_file, const CleanSettings& settings,
                      uint32_t node, uint32_t nodes) {
  const LshBands bands = choose_lsh_bands(settings.minhash_permutations, settings.near_threshold);
  const std::vector<uint32_t> mine = owned_bands(bands.bands, node, nodes);
  std::vector<std::unordered_map<uint64_t, std::vector<uint64_t>>> buckets(mine.size());
  std::optional<DuplicateLists> duplicates;
  if (settings.exact_dedup) duplicates.emplace(parts, nodes);
  const fs::path path = parts / ("near-" + std::to_string(node) + ".list");
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out.write(kNearMagic.data(), static_cast<std::streamsize>(kNearMagic.size()));
  uint64_t entries = 0;
  std::vector<uint32_t> signature(settings.minhash_permutations);
  std::vector<uint64_t> candidates;
  for (size_t begin = 0; begin < keys.size();) {
    size_t end = begin;
    while (end < keys.size() && unit_file[end] == unit_file[begin]) ++end;
    std::vector<FileOutcome> outcomes;
    for (size_t u = begin; u < end; ++u) outcomes.push_back(read_unit_outcome(parts, keys[u]));
    // A file dropped whole counts none of its documents, as on one node.
    for (size_t u = begin; u < end && !file_dropped(combined_outcome(outcomes)); ++u) {
      SignatureFileReader reader(parts, keys[u], settings.minhash_permutations);
      bool has = false;
      for (uint64_t ordinal = 0; reader.next(has, signature); ++ordinal) {
        const DocPosition at{u, ordinal};
        DocPosition first;
        // An exact duplicate is never kept nor compared: it is in no bucket.
        if (!has || (duplicates && duplicates->duplicate(at, first))) continue;
        const uint64_t place = packed_position(at);
        candidates.clear();
        for (size_t k = 0; k < mine.size(); ++k) {
          std::vector<uint64_t>& bucket = buckets[k][lsh_band_key(signature, bands, mine[k])];
          candidates.insert(candidates.end(), bucket.begin(), bucket.end());
          bucket.push_back(place);
          ++entries;
        }
        if (candidates.empty()) continue;
        std::sort(candidates.begin(), candidates.end());
        candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
        parts::put<uint64_t>(out, place);
        parts::put<uint32_t>(out, static_cast<uint32_t>(candidates.size()));
        for (uint64_t candidate : candidates) parts::put(out, candidate);
      }
    }
    begin = end;
  }
  parts::commit(out, tmp, path);
  return entries;
}

NearCandidateLists::NearCandidateLists(const fs::path& parts, uint32_t partitions) {
  for (uint32_t p = 0; p < partitions; ++p) {
    List list;
    list.path = parts / ("near-" + std::to_string(p) + ".list");
    list.in = std::make_unique<std::ifstream>(list.path, std::ios::binary);
    parts::check_magic(*list.in, list.path, kNearMagic);
    list.advance();
    lists_.push_back(std::move(list));
  }
}

void NearCandidateLists::List::advance() {
  has = parts::get(*in, at) && parts::get(*in, count);
  if (!has && !in->eof()) throw DataError("damaged " + path.string() + ": rerun the nodes");
}

void NearCandidateLists::candidates(const DocPosition& at, std::vector<uint64_t>& candidates) {
  candidates.clear();
  const uint64_t place = packed_position(at);
  for (List& list : lists_) {
    if (list.has && list.at < place) {
      throw DataError(list.path.string() + " is out of step with the corpus (a document the "
                      "merge did not ask for): rerun the nodes");
    }
    if (!list.has || list.at != place) continue;
    const size_t from = candidates.size();
    candidates.resize(from + list.count);
    if (!list.in->read(reinterpret_cast<char*>(candidates.data() + from),
                       static_cast<std::streamsize>(list.count * sizeof(uint64_t)))) {
      throw DataError("damaged " + list.path.string() + ": rerun the nodes");
    }
    list.advance();
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
}

PartSignatures::PartSignatures(const fs::path& parts, const std::vector<std::string>& keys,
                               uint32_t permutations)
    : parts_(parts), keys_(keys), permutations_(permutations) {}

void PartSignatures::read(const DocPosition& at, std::vector<uint32_t>& signature) {
  if (at.unit >= keys_.size()) throw DataError("a candidate of near dedup beyond the units");
  auto file = open_.find(at.unit);
  if (file == open_.end()) {
    if (open_.size() >= kOpenFiles) open_.clear();
    const fs::path path = signatures_path(parts_, keys_[at.unit]);
    std::ifstream in(path, std::ios::binary);
    parts::check_magic(in, path, kMinhashMagic);
    uint32_t theirs = 0;
    if (!parts::get(in, theirs) || theirs != permutations_) {
      throw DataError("damaged " + path.string() + " (not " + std::to_string(permutations_) +
                      " permutations): rerun the nodes");
    }
    file = open_.emplace(at.unit, std::move(in)).first;
  }
  const fs::path path = signatures_path(parts_, keys_[at.unit]);
  std::ifstream& in = file->second;
  const size_t record = 1 + size_t{permutations_} * sizeof(uint32_t);
  in.clear();
  in.seekg(static_cast<std::streamoff>(kMinhashHead + at.ordinal * record));
  uint8_t has = 0;
  signature.resize(permutations_);
  if (!parts::get(in, has) || has == 0 ||
      !in.read(reinterpret_cast<char*>(signature.data()),
               static_cast<std::streamsize>(record - 1))) {
    throw DataError("damaged " + path.string() + " (no signature of document " +
                    std::to_string(at.ordinal) + "): rerun the nodes");
  }
  ++reads_;
}

}  // namespace dseek::data
