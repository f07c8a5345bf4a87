// Exact dedup partitioned by hash (see hash_partition.hpp). Files, little-endian:
//   <key>.hashes:   magic, u8 outcome, u64 count, count x (u64 ordinal, u64 low, u64 high)
//   dups-<p>.list:  magic, then per later copy u64 unit, ordinal, first unit, first ordinal
#include "runtime/data/hash_partition.hpp"

#include <unordered_map>

#include "runtime/data/part_records.hpp"
#include "runtime/data/piece_cache.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kHashesMagic = "dseek prepare hashes 1\n";
constexpr std::string_view kDupsMagic = "dseek prepare duplicates 1\n";

fs::path summary_path(const fs::path& parts, const std::string& key) {
  return parts / (key + ".hashes");
}

std::ifstream open_with_magic(const fs::path& path, std::string_view magic) {
  std::ifstream in(path, std::ios::binary);
  parts::check_magic(in, path, magic);
  return in;
}

struct Hash128 {
  uint64_t low, high;
  bool operator==(const Hash128&) const = default;
};
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return h.high ^ (h.low * 0x9E3779B97F4A7C15ull); }
};

// A unit's summary, read record by record.
struct SummaryReader {
  fs::path path;
  std::ifstream in;
  FileOutcome outcome = FileOutcome::taken;
  uint64_t left = 0;
  SummaryReader(const fs::path& parts, const std::string& key)
      : path(summary_path(parts, key)),
        in(open_with_magic(path, kHashesMagic)) {
    uint8_t code = 0;
    if (!parts::get(in, code) || code > static_cast<uint8_t>(FileOutcome::unreadable) || !parts::get(in, left)) {
      throw DataError("damaged " + path.string() + ": rerun the nodes");
    }
    outcome = static_cast<FileOutcome>(code);
  }
  bool next(uint64_t& ordinal, Hash128& hash) {
    if (left == 0) return false;
    if (!parts::get(in, ordinal) || !parts::get(in, hash.low) || !parts::get(in, hash.high)) {
      throw DataError("damaged " + path.string() + ": rerun the nodes");
    }
    --left;
    return true;
  }
};

}  // namespace

void write_unit_summary(const fs::path& parts, const std::string& key) {
  const fs::path path = summary_path(parts, key);
  std::error_code error;
  if (fs::is_regular_file(path, error)) return;
  std::vector<std::pair<uint64_t, Hash128>> records;
  FileOutcome outcome = FileOutcome::taken;
  CacheEntryReader reader(parts, key);
  uint64_t ordinal = 0;
  for (bool last = false; !last;) {
    const Piece piece = reader.next();
    for (const PieceDocument& document : piece.documents) {
      // Passed clean: hashed (kept, or without tokens, which tokenize drops after dedup).
      if ((document.hash_low | document.hash_high) != 0) {
        records.push_back({ordinal, {document.hash_low, document.hash_high}});
      }
      ++ordinal;
    }
    last = piece.last;
    if (last) outcome = piece.outcome;
  }
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out.write(kHashesMagic.data(), static_cast<std::streamsize>(kHashesMagic.size()));
  parts::put<uint8_t>(out, static_cast<uint8_t>(outcome));
  parts::put<uint64_t>(out, records.size());
  for (const auto& [at, hash] : records) {
    parts::put(out, at);
    parts::put(out, hash.low);
    parts::put(out, hash.high);
  }
  parts::commit(out, tmp, path);
}

FileOutcome read_unit_outcome(const fs::path& parts, const std::string& key) {
  return SummaryReader(parts, key).outcome;
}

FileOutcome combined_outcome(const std::vector<FileOutcome>& outcomes) {
  for (FileOutcome bad : {FileOutcome::unreadable, FileOutcome::damaged, FileOutcome::binary}) {
    for (FileOutcome outcome : outcomes)
      if (outcome == bad) return bad;
  }
  for (FileOutcome outcome : outcomes)
    if (outcome == FileOutcome::taken) return outcome;
  return outcomes.empty() ? FileOutcome::empty : outcomes.front();
}

uint64_t decide_partition(const fs::path& parts, const std::vector<std::string>& keys,
                          const std::vector<uint32_t>& unit_file, uint32_t partition,
                          uint32_t partitions) {
  std::unordered_map<Hash128, DocPosition, Hash128Hasher> first;
  const fs::path path = parts / ("dups-" + std::to_string(partition) + ".list");
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out.write(kDupsMagic.data(), static_cast<std::streamsize>(kDupsMagic.size()));
  for (size_t begin = 0; begin < keys.size();) {
    size_t end = begin;
    while (end < keys.size() && unit_file[end] == unit_file[begin]) ++end;
    // A file's units (its byte ranges) together: a dropped file counts for nothing.
    std::vector<FileOutcome> outcomes;
    for (size_t u = begin; u < end; ++u) outcomes.push_back(read_unit_outcome(parts, keys[u]));
    if (!file_dropped(combined_outcome(outcomes))) {
      for (size_t u = begin; u < end; ++u) {
        SummaryReader reader(parts, keys[u]);
        uint64_t ordinal = 0;
        Hash128 hash{};
        while (reader.next(ordinal, hash)) {
          if (hash_partition(hash.low, partitions) != partition) continue;
          const DocPosition at{u, ordinal};
          auto [it, inserted] = first.try_emplace(hash, at);
          if (inserted) continue;
          parts::put(out, at.unit);
          parts::put(out, at.ordinal);
          parts::put(out, it->second.unit);
          parts::put(out, it->second.ordinal);
        }
      }
    }
    begin = end;
  }
  parts::commit(out, tmp, path);
  return first.size();
}

DuplicateLists::DuplicateLists(const fs::path& parts, uint32_t partitions) {
  for (uint32_t p = 0; p < partitions; ++p) {
    List list;
    list.path = parts / ("dups-" + std::to_string(p) + ".list");
    list.in = std::make_unique<std::ifstream>(
        open_with_magic(list.path, kDupsMagic));
    list.advance();
    lists_.push_back(std::move(list));
  }
}

void DuplicateLists::List::advance() {
  has = parts::get(*in, at.unit) && parts::get(*in, at.ordinal) && parts::get(*in, first.unit) &&
        parts::get(*in, first.ordinal);
  if (!has && !in->eof()) throw DataError("damaged " + path.string() + ": rerun the nodes");
}

bool DuplicateLists::duplicate(const DocPosition& at, DocPosition& first) {
  for (List& list : lists_) {
    while (list.has && list.at < at) list.advance();  // a place not asked
    if (!list.has || list.at != at) continue;
    first = list.first;
    list.advance();
    return true;
  }
  return false;
}

}  // namespace dseek::data
