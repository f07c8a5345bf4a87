// libFuzzer target: the checkpoint loader (checkpoint::load) on a checkpoint folder made
// from the input (fuzz_files.hpp's bundle: COMMITTED, manifest.capnp, params.bin,
// adam_m.bin, adam_v.bin, as `dseek ckpt import` writes them for fuzz/make_seeds.py's
// tiny GPT-2): the manifest, each file's size and checksums, the slices assembled into
// tensors and placed into the reader's layout.
// The manifest's own checksum stops almost every mutation of it at the door, so a bundle
// may also hold a file "edits": 10-byte records (operation, tensor index, 64-bit value)
// applied to the manifest once it has been read, after which every checksum is
// recomputed, as a writer that is wrong (or an attacker) would: shapes, slices, offsets,
// file sizes, roles and names then reach the loader's own checks. A CheckpointError is
// the expected answer to bad input; anything else is a bug.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "fuzz/fuzz_files.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/manifest.hpp"

namespace {

namespace ck = dseek::checkpoint;

void apply_edits(ck::Manifest& m, std::string_view edits) {
  for (size_t at = 0; at + 10 <= edits.size() && !m.tensors.empty(); at += 10) {
    const auto op = static_cast<uint8_t>(edits[at]);
    ck::TensorShard& t = m.tensors[static_cast<uint8_t>(edits[at + 1]) % m.tensors.size()];
    uint64_t v = 0;
    std::memcpy(&v, edits.data() + at + 2, 8);
    switch (op % 11) {
      case 0: if (!t.shape.empty()) t.shape[0] = static_cast<int64_t>(v >> 1); break;
      case 1: t.shape.push_back(static_cast<int64_t>(v >> 1)); break;
      case 2: t.slice_offset = v; break;
      case 3: t.slice_count = v; break;
      case 4: t.byte_offset = v; break;
      case 5: if (!m.files.empty()) m.files[v % m.files.size()].bytes = v >> 8; break;
      case 6: m.tensors.push_back(t); break;
      case 7: m.tensors.erase(m.tensors.begin() + static_cast<std::ptrdiff_t>(&t - m.tensors.data())); break;
      case 8: t.role = static_cast<ck::Role>(v % 3); break;
      case 9: std::swap(t.name, m.tensors[v % m.tensors.size()].name); break;
      default: t.shape.clear(); break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The shape of fuzz/make_seeds.py's model.
  static const dseek::model::ParamLayout layout(
      dseek::model::GptShape{.dim = 4, .layers = 1, .heads = 2, .context = 4, .vocab = 8});
  const auto& dir = dseek::fuzz::scratch_dir();
  auto files = dseek::fuzz::unbundle(data, size);
  std::string_view edits;
  for (auto it = files.begin(); it != files.end(); ++it) {
    if (it->first == "edits") {
      edits = it->second;
      files.erase(it);
      break;
    }
  }
  dseek::fuzz::write_files(files);
  try {
    if (!edits.empty()) {
      ck::Manifest m = ck::read_manifest(dir);
      apply_edits(m, edits);
      for (ck::TensorShard& t : m.tensors) {
        for (const auto& [name, bytes] : files) {
          if (name != t.file || t.slice_count > bytes.size() / 4 ||
              t.byte_offset > bytes.size() - t.slice_count * 4)
            continue;
          t.xxhash64 = ck::shard_checksum(t, bytes.data() + t.byte_offset, t.slice_count * 4,
                                          m.format_version);
        }
      }
      m.checksum = ck::manifest_checksum(m);
      ck::write_manifest(dir / ck::kManifestFile, m);
    }
    (void)ck::load(dir, layout);
  } catch (const ck::CheckpointError&) {
  }
  return 0;
}
