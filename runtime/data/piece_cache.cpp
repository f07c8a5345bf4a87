// The prepare cache's keys and entry files (see piece_cache.hpp). An entry: the magic
// line, then per piece its header, problems and documents, all little-endian.
#include "runtime/data/piece_cache.hpp"

#include <xxhash.h>

#include <cstdio>
#include <sstream>

#include "runtime/data/byte_source.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/tokenizer.hpp"

namespace dseek::data {
namespace {

constexpr char kMagic[] = "dseek prepare cache 1\n";

// Everything that changes what the writer gets for a file (not the workers, window,
// shard size, split or faults: they change nothing before the writer).
std::string settings_text(const PrepareOptions& o, const Tokenizer& tokenizer) {
  std::ostringstream s;
  const CleanSettings& c = o.clean;
  s << "tokenizer " << tokenizer.name() << " " << tokenizer.files_sha256() << " "
    << tokenizer.vocab_size() << "\njsonl " << o.input_options.jsonl_field << " "
    << o.input_options.strict << " " << o.input_options.reject_nul << "\ntext separator "
    << o.input_options.text_separator.size() << " " << o.input_options.text_separator
    << "\ndecode "
    << o.repair_utf8 << o.nfc << " " << o.piece_bytes << " " << o.max_bytes << "\nclean "
    << c.exact_dedup << c.near_dedup << " " << c.near_threshold << " " << c.minhash_permutations
    << " " << c.shingle_words << " " << c.min_chars << " " << c.max_chars << " "
    << c.max_symbol_ratio << " " << c.max_digit_ratio << " " << c.max_repeated_lines << " "
    << c.ratio_min_chars << "\nfim " << o.fim.rate << " " << o.fim.spm_rate << " " << o.fim.seed
    << "\n";
  return s.str();
}

std::string hex128(XXH128_hash_t h) {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return text;
}

template <class T>
void put(std::ostream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof value);
}
void put_string(std::ostream& out, const std::string& text) {
  put<uint64_t>(out, text.size());
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}
template <class T>
void put_vector(std::ostream& out, const std::vector<T>& v) {
  put<uint64_t>(out, v.size());
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

struct Input {
  std::istream& in;
  const std::filesystem::path& path;
  template <class T>
  T get() {
    T value{};
    in.read(reinterpret_cast<char*>(&value), sizeof value);
    if (!in) throw DataError("damaged prepare cache entry " + path.string());
    return value;
  }
  uint64_t size(uint64_t limit) {
    const auto n = get<uint64_t>();
    if (n > limit) throw DataError("damaged prepare cache entry " + path.string());
    return n;
  }
  std::string string() {
    std::string text(size(uint64_t{1} << 32), '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (!in) throw DataError("damaged prepare cache entry " + path.string());
    return text;
  }
  template <class T>
  std::vector<T> vector() {
    std::vector<T> v(size(uint64_t{1} << 34));
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
    if (!in) throw DataError("damaged prepare cache entry " + path.string());
    return v;
  }
};

// Per file: XXH3-128 of (seed, the relative path, the bytes); the seed is the settings'
// hash, and with `chain` the previous file's key instead for every file after the first.
std::vector<std::string> file_keys(const std::string& settings, const SourceListing& listing,
                                   bool chain) {
  const XXH128_hash_t seed = XXH3_128bits(settings.data(), settings.size());
  XXH128_hash_t previous = seed;
  std::vector<std::string> keys;
  std::vector<char> buffer(1 << 20);
  for (const SourceFile& file : listing.files) {
    XXH3_state_t* state = XXH3_createState();
    XXH3_128bits_reset(state);
    const XXH128_hash_t& before = chain ? previous : seed;
    XXH3_128bits_update(state, &before, sizeof before);
    XXH3_128bits_update(state, file.relative.data(), file.relative.size() + 1);
    if (file.range) {  // a node's byte range of the file
      const uint64_t range[4] = {file.range->begin, file.range->end, file.range->index,
                                 file.range->count};
      XXH3_128bits_update(state, range, sizeof range);
    }
    std::ifstream in(file.path, std::ios::binary);
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      XXH3_128bits_update(state, buffer.data(), static_cast<size_t>(in.gcount()));
    }
    // An unreadable file hashes as its name: its outcome (unreadable) is cached too.
    previous = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    keys.push_back(hex128(previous));
  }
  return keys;
}

// A node's part holds the pieces before dedup: not the cache's entries.
std::string part_settings(const PrepareOptions& options, const Tokenizer& tokenizer) {
  return "prepare part 2\n" + settings_text(options, tokenizer);
}

}  // namespace

std::vector<std::string> cache_keys(const PrepareOptions& options, const Tokenizer& tokenizer,
                                    const SourceListing& listing) {
  return file_keys(settings_text(options, tokenizer), listing, true);
}

std::vector<std::string> part_keys(const PrepareOptions& options, const Tokenizer& tokenizer,
                                   const SourceListing& listing) {
  return file_keys(part_settings(options, tokenizer), listing, false);
}

std::string part_fingerprint(const PrepareOptions& options, const Tokenizer& tokenizer,
                             const SourceListing& listing) {
  std::string text = part_settings(options, tokenizer) + "nodes " +
                     std::to_string(options.nodes) + "\n";
  for (const SourceFile& file : listing.files) {
    text.append(file.relative);
    if (file.range) {
      text += " range " + std::to_string(file.range->begin) + " " +
              std::to_string(file.range->end);
    }
    text.push_back('\n');
  }
  return hex128(XXH3_128bits(text.data(), text.size()));
}

bool cache_has(const std::filesystem::path& dir, const std::string& key) {
  std::error_code error;
  return std::filesystem::is_regular_file(dir / (key + ".piece"), error);
}

CacheEntryWriter::CacheEntryWriter(const std::filesystem::path& dir, const std::string& key)
    : tmp_(dir / (key + ".tmp")), final_(dir / (key + ".piece")) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw DataError("cannot write the prepare cache entry " + tmp_.string());
  out_.write(kMagic, sizeof kMagic - 1);
}

CacheEntryWriter::~CacheEntryWriter() {
  if (committed_) return;
  out_.close();
  std::error_code error;
  std::filesystem::remove(tmp_, error);
}

void CacheEntryWriter::append(const Piece& p) {
  put<uint32_t>(out_, p.number);
  put<uint8_t>(out_, p.last);
  put<uint8_t>(out_, p.limit_reached);
  put<uint8_t>(out_, static_cast<uint8_t>(p.outcome));
  put<uint64_t>(out_, p.counts.damaged_files);
  put<uint64_t>(out_, p.counts.malformed_lines);
  put<uint64_t>(out_, p.counts.missing_field_lines);
  put<uint64_t>(out_, p.replaced);
  put<uint64_t>(out_, p.problems.size());
  for (const std::string& problem : p.problems) put_string(out_, problem);
  put<uint64_t>(out_, p.documents.size());
  for (const PieceDocument& d : p.documents) {
    put<uint64_t>(out_, d.line);
    put<uint64_t>(out_, d.text_bytes);
    put<uint64_t>(out_, d.key_hash);
    put<uint8_t>(out_, static_cast<uint8_t>(d.drop));
    put<uint64_t>(out_, d.hash_low);
    put<uint64_t>(out_, d.hash_high);
    put<uint8_t>(out_, d.fim);
    put_vector(out_, d.signature);
    put_vector(out_, d.tokens);
  }
  if (!out_) throw DataError("cannot write the prepare cache entry " + tmp_.string());
}

void CacheEntryWriter::commit() {
  out_.close();
  if (!out_) throw DataError("cannot write the prepare cache entry " + tmp_.string());
  std::error_code error;
  std::filesystem::rename(tmp_, final_, error);
  if (error) throw DataError("cannot rename " + tmp_.string() + ": " + error.message());
  committed_ = true;
}

CacheEntryReader::CacheEntryReader(const std::filesystem::path& dir, const std::string& key)
    : path_(dir / (key + ".piece")), in_(path_, std::ios::binary) {
  char magic[sizeof kMagic - 1];
  in_.read(magic, sizeof magic);
  if (!in_ || std::string(magic, sizeof magic) != kMagic) {
    throw DataError("damaged prepare cache entry " + path_.string());
  }
}

Piece CacheEntryReader::next() {
  Input in{in_, path_};
  Piece p;
  p.cached = true;
  p.number = in.get<uint32_t>();
  p.last = in.get<uint8_t>() != 0;
  p.limit_reached = in.get<uint8_t>() != 0;
  const auto outcome = in.get<uint8_t>();
  if (outcome > static_cast<uint8_t>(FileOutcome::unreadable)) {
    throw DataError("damaged prepare cache entry " + path_.string());
  }
  p.outcome = static_cast<FileOutcome>(outcome);
  p.counts.damaged_files = in.get<uint64_t>();
  p.counts.malformed_lines = in.get<uint64_t>();
  p.counts.missing_field_lines = in.get<uint64_t>();
  p.replaced = in.get<uint64_t>();
  for (uint64_t i = 0, n = in.size(uint64_t{1} << 32); i < n; ++i) p.problems.push_back(in.string());
  const uint64_t documents = in.size(uint64_t{1} << 32);
  p.documents.resize(documents);
  for (PieceDocument& d : p.documents) {
    d.line = in.get<uint64_t>();
    d.text_bytes = in.get<uint64_t>();
    d.key_hash = in.get<uint64_t>();
    const auto drop = in.get<uint8_t>();
    if (drop >= kDropReasons) throw DataError("damaged prepare cache entry " + path_.string());
    d.drop = static_cast<DropReason>(drop);
    d.hash_low = in.get<uint64_t>();
    d.hash_high = in.get<uint64_t>();
    d.fim = in.get<uint8_t>() != 0;
    d.signature = in.vector<uint32_t>();
    d.tokens = in.vector<uint32_t>();
  }
  return p;
}

}  // namespace dseek::data
