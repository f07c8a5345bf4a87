// Checkpoint files: a written checkpoint loads back bit for bit; a corrupted, truncated
// or uncommitted one is refused with a message naming the file and tensor, and "latest"
// falls back to the previous committed one; a failed write leaves the previous
// checkpoint intact; keep_last prunes; a checkpoint whose tensors are split into slices
// over two files (as N data-parallel ranks would write it) loads into one trainer.
#include <catch2/catch.hpp>

#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/file_ops.hpp"
#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/write.hpp"
#include "runtime/checkpoint/writer_thread.hpp"
#include "support/test_paths.hpp"

namespace ck = dseek::checkpoint;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using dseek::testing::ScratchDir;

namespace {

const dseek::model::ParamLayout& tiny_layout() {
  static const dseek::model::ParamLayout layout(dseek::model::GptShape{16, 2, 2, 8, 32});
  return layout;
}

ck::Snapshot make_snapshot(int64_t step, uint32_t seed) {
  ck::Snapshot s;
  s.step = step;
  s.optimizer_steps = step;
  s.seed = 1337;
  s.config_toml = "[train]\nseed = 1337\n";
  s.tensors = tiny_layout().tensors();
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto* buffer : {&s.params, &s.adam_m, &s.adam_v}) {
    buffer->resize(tiny_layout().total());
    for (float& x : *buffer) x = normal(rng);
  }
  return s;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ck::CheckpointError& error) {
    return error.what();
  }
  return "(no error)";
}

void flip_byte(const fs::path& file, uint64_t offset) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  io.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x5a);
  io.seekp(static_cast<std::streamoff>(offset));
  io.write(&byte, 1);
}

}  // namespace

TEST_CASE("checkpoint: write then load gives back the same state", "[checkpoint]") {
  ScratchDir dir("ckpt-roundtrip");
  auto snapshot = make_snapshot(12, 1);
  auto result = ck::write_checkpoint(snapshot, {dir.path(), 3, false});
  CHECK(result.path == dir / "step-00000012");
  CHECK(result.bytes > 3 * snapshot.params.size() * sizeof(float));
  for (const char* file : {"params.bin", "adam_m.bin", "adam_v.bin", "manifest.capnp", "COMMITTED"})
    CHECK(fs::exists(result.path / file));
  // Nothing temporary is left behind.
  for (const auto& entry : fs::directory_iterator(dir.path()))
    CHECK(entry.path().filename().string() == "step-00000012");

  auto loaded = ck::load(result.path, tiny_layout());
  CHECK(loaded.params == snapshot.params);
  CHECK(loaded.adam_m == snapshot.adam_m);
  CHECK(loaded.adam_v == snapshot.adam_v);
  const auto& m = loaded.manifest;
  CHECK(m.step == 12);
  CHECK(m.optimizer_steps == 12);
  CHECK(m.next_step == 12);
  CHECK(m.seed == 1337);
  CHECK(m.world_size == 1);
  CHECK(m.data_parallel == 1);
  CHECK(m.zero_stage == 0);
  CHECK(m.precision.loss_scale == 1.0);
  CHECK(m.precision.precision.empty());  // the snapshot said none
  CHECK(m.precision.fp8.empty());
  CHECK(m.config_toml == snapshot.config_toml);
  CHECK(m.tensors.size() == 3 * tiny_layout().tensors().size());
  // params.bin is the raw little-endian fp32 buffer (readable by mmap or numpy.fromfile).
  auto raw = ck::io::read_whole(result.path / "params.bin");
  REQUIRE(raw.size() == snapshot.params.size() * sizeof(float));
  CHECK(std::memcmp(raw.data(), snapshot.params.data(), raw.size()) == 0);
  CHECK_NOTHROW(ck::verify(result.path));
}

TEST_CASE("checkpoint: a corrupted byte is found and latest falls back", "[checkpoint]") {
  ScratchDir dir("ckpt-corrupt");
  auto older = make_snapshot(4, 1);
  auto newer = make_snapshot(8, 2);
  ck::write_checkpoint(older, {dir.path(), 3, false});
  auto written = ck::write_checkpoint(newer, {dir.path(), 3, false});
  // A byte inside the second tensor (wpe.weight) of params.bin.
  const auto& wpe = tiny_layout().tensors()[1];
  flip_byte(written.path / "params.bin", wpe.offset * sizeof(float) + 5);

  auto message = error_of([&] { ck::verify(written.path); });
  CHECK_THAT(message, Contains("checksum mismatch"));
  CHECK_THAT(message, Contains((written.path / "params.bin").string()));
  CHECK_THAT(message, Contains("tensor " + wpe.name));

  std::vector<std::string> fallbacks;
  auto loaded = ck::load_for_resume("latest", dir.path(), tiny_layout(),
                                    [&](const std::string& error, const fs::path& next) {
                                      fallbacks.push_back(error + " -> " + next.string());
                                    });
  REQUIRE(loaded.has_value());
  CHECK(loaded->manifest.step == 4);
  CHECK(loaded->params == older.params);
  REQUIRE(fallbacks.size() == 1);
  CHECK_THAT(fallbacks[0], Contains("params.bin"));
  CHECK_THAT(fallbacks[0], Contains(wpe.name));
  CHECK_THAT(fallbacks[0], Contains("step-00000004"));

  // With the older one corrupt too there is nothing to fall back to.
  flip_byte(dir / "step-00000004/adam_v.bin", 0);
  auto none = error_of([&] { ck::load_for_resume("latest", dir.path(), tiny_layout(), [](auto&, auto&) {}); });
  CHECK_THAT(none, Contains("adam_v.bin"));
  CHECK_THAT(none, Contains("no older committed checkpoint"));
}

TEST_CASE("checkpoint: truncated files and bad manifests are errors", "[checkpoint]") {
  ScratchDir dir("ckpt-truncated");
  auto written = ck::write_checkpoint(make_snapshot(3, 1), {dir.path(), 3, false});
  const auto params = written.path / "params.bin";
  fs::resize_file(params, fs::file_size(params) - 10);
  auto message = error_of([&] { ck::load(written.path, tiny_layout()); });
  CHECK_THAT(message, Contains(params.string()));
  CHECK_THAT(message, Contains("truncated"));
  CHECK_THAT(message, Contains("tensor lnf.bias"));  // the last tensor lies past the end

  auto second = ck::write_checkpoint(make_snapshot(5, 1), {dir.path(), 3, false});
  {
    std::ofstream garble(second.path / "manifest.capnp", std::ios::binary | std::ios::trunc);
    garble << "this is not a cap'n proto message";
  }
  message = error_of([&] { ck::verify(second.path); });
  CHECK_THAT(message, Contains("malformed checkpoint manifest"));
  CHECK_THAT(message, Contains((second.path / "manifest.capnp").string()));

  fs::remove(second.path / "manifest.capnp");
  message = error_of([&] { ck::load(second.path, tiny_layout()); });
  CHECK_THAT(message, Contains("missing checkpoint manifest"));

  // Without its COMMITTED marker a checkpoint does not exist for readers.
  fs::remove(second.path / "COMMITTED");
  CHECK(ck::list_committed(dir.path()).size() == 1);
  CHECK_THAT(error_of([&] { ck::load(second.path, tiny_layout()); }), Contains("not committed"));
}

TEST_CASE("checkpoint: a failed write leaves the previous checkpoint intact", "[checkpoint]") {
  ScratchDir dir("ckpt-fail");
  auto good = make_snapshot(2, 1);
  ck::write_checkpoint(good, {dir.path(), 3, false});
  auto message = error_of([&] { ck::write_checkpoint(make_snapshot(4, 2), {dir.path(), 3, true}); });
  CHECK_THAT(message, Contains("params.bin"));
  CHECK_THAT(message, Contains("fail_checkpoint_write"));
  auto committed = ck::list_committed(dir.path());
  REQUIRE(committed.size() == 1);
  CHECK(committed[0].step == 2);
  for (const auto& entry : fs::directory_iterator(dir.path()))  // the half-written one is gone
    CHECK(entry.path().filename().string() == "step-00000002");
  CHECK(ck::load(committed[0].path, tiny_layout()).params == good.params);

  // A root that cannot be a directory (a regular file) fails with its name.
  std::ofstream(dir / "a-file") << "x";
  message = error_of([&] { ck::write_checkpoint(good, {dir / "a-file" / "sub", 3, false}); });
  CHECK_THAT(message, Contains("a-file"));
}

TEST_CASE("checkpoint: keep_last deletes the older committed checkpoints", "[checkpoint]") {
  ScratchDir dir("ckpt-keep");
  for (int step : {1, 2, 3, 4, 5}) ck::write_checkpoint(make_snapshot(step, 1), {dir.path(), 2, false});
  auto committed = ck::list_committed(dir.path());
  REQUIRE(committed.size() == 2);
  CHECK(committed[0].step == 4);
  CHECK(committed[1].step == 5);
}

TEST_CASE("checkpoint: the background writer persists while the caller goes on",
          "[checkpoint]") {
  ScratchDir dir("ckpt-writer");
  for (bool async : {true, false}) {
    ck::CheckpointWriter writer({dir.path() / (async ? "async" : "sync"), 3, false}, async);
    CHECK_FALSE(writer.busy());
    writer.buffer() = make_snapshot(7, 3);
    writer.submit(false);
    writer.wait();
    CHECK_FALSE(writer.busy());
    writer.buffer().step = 8;
    writer.submit(true);  // the injected fault: reported, not thrown
    writer.wait();
    auto outcomes = writer.take_outcomes();
    REQUIRE(outcomes.size() == 2);
    CHECK(outcomes[0].ok);
    CHECK(outcomes[0].step == 7);
    CHECK(outcomes[0].result.write_ms > 0);
    CHECK_FALSE(outcomes[1].ok);
    CHECK_THAT(outcomes[1].error, Contains("fail_checkpoint_write"));
    CHECK(writer.take_outcomes().empty());
    CHECK(ck::list_committed(dir.path() / (async ? "async" : "sync")).size() == 1);
  }
}

// What N data-parallel ranks with ZeRO would write: each rank a file holding its slice
// of every tensor. The loader assembles the slices by offset.
TEST_CASE("checkpoint: tensors split over two shard files load into one model",
          "[checkpoint][reshard]") {
  ScratchDir dir("ckpt-shards");
  const auto snapshot = make_snapshot(6, 9);
  const fs::path ckpt = dir / "step-00000006";
  fs::create_directories(ckpt);
  ck::Manifest manifest;
  manifest.step = manifest.next_step = manifest.optimizer_steps = 6;
  manifest.world_size = manifest.data_parallel = 2;
  manifest.zero_stage = 1;
  manifest.seed = 1337;
  const std::pair<ck::Role, const std::vector<float>*> roles[] = {
      {ck::Role::param, &snapshot.params}, {ck::Role::adam_m, &snapshot.adam_m},
      {ck::Role::adam_v, &snapshot.adam_v}};
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = "rank-" + std::to_string(rank) + ".bin";
    std::vector<float> bytes;
    // Rank 1 lists its shards first: order in the manifest must not matter.
    for (const auto& [role, values] : roles) {
      for (const auto& tensor : tiny_layout().tensors()) {
        const uint64_t half = tensor.size() / 2 + 1;  // uneven split
        const uint64_t begin = rank == 0 ? 0 : half;
        const uint64_t count = rank == 0 ? half : tensor.size() - half;
        ck::TensorShard shard;
        shard.name = tensor.name;
        shard.role = role;
        shard.shape = tensor.shape;
        shard.slice_offset = begin;
        shard.slice_count = count;
        shard.file = file;
        shard.byte_offset = bytes.size() * sizeof(float);
        const float* first = values->data() + tensor.offset + begin;
        shard.xxhash64 = ck::shard_checksum(shard, first, count * sizeof(float));
        bytes.insert(bytes.end(), first, first + count);
        if (rank == 1) manifest.tensors.insert(manifest.tensors.begin(), shard);
        else manifest.tensors.push_back(shard);
      }
    }
    ck::io::OutputFile out(ckpt / file);
    out.write(bytes.data(), bytes.size() * sizeof(float));
    out.sync_and_close();
    manifest.files.push_back({file, bytes.size() * sizeof(float)});
  }
  ck::write_manifest(ckpt / ck::kManifestFile, manifest);
  ck::io::OutputFile(ckpt / ck::kCommittedFile).sync_and_close();

  auto loaded = ck::load(ckpt, tiny_layout());
  CHECK(loaded.params == snapshot.params);
  CHECK(loaded.adam_m == snapshot.adam_m);
  CHECK(loaded.adam_v == snapshot.adam_v);
  CHECK(loaded.manifest.data_parallel == 2);

  // Drop one shard: the gap is named.
  manifest.tensors.erase(manifest.tensors.begin());
  ck::write_manifest(ckpt / ck::kManifestFile, manifest);
  auto message = error_of([&] { ck::load(ckpt, tiny_layout()); });
  CHECK_THAT(message, Contains("cover"));
}

TEST_CASE("checkpoint: a model of another shape is refused by tensor name", "[checkpoint]") {
  ScratchDir dir("ckpt-shape");
  auto written = ck::write_checkpoint(make_snapshot(1, 1), {dir.path(), 3, false});
  dseek::model::ParamLayout wider(dseek::model::GptShape{32, 2, 2, 8, 32});
  auto message = error_of([&] { ck::load(written.path, wider); });
  CHECK_THAT(message, Contains("tensor wte "));
  CHECK_THAT(message, Contains("another shape"));
}

// Two layers' weights of one shape swapped in the manifest (finding 5 of issue 28): with
// checksums of the bytes alone this passed verify and a resume loaded the wrong layers.
// Each shard's checksum is bound to its entry's name, role, dtype, shape and slice, and
// the manifest has a checksum of its own.
TEST_CASE("checkpoint: a swapped or renamed tensor entry is caught by verify and on load",
          "[checkpoint]") {
  ScratchDir dir("ckpt-swapped");
  const auto snapshot = make_snapshot(7, 3);
  const auto written = ck::write_checkpoint(snapshot, {dir.path(), 3, false});
  const fs::path manifest_file = written.path / ck::kManifestFile;
  const ck::Manifest original = ck::read_manifest(written.path);
  CHECK(original.format_version == ck::kFormatVersion);
  CHECK(original.checksum == ck::manifest_checksum(original));
  CHECK(ck::verify(written.path).step == 7);
  const std::string a = "h.0.attn.qkv.weight", b = "h.1.attn.qkv.weight";

  SECTION("edited bytes of the manifest: its own checksum") {
    std::vector<char> bytes = ck::io::read_whole(manifest_file);
    std::string text(bytes.begin(), bytes.end());
    const size_t at_a = text.find(a), at_b = text.find(b);  // the param entries come first
    REQUIRE(at_a != std::string::npos);
    REQUIRE(at_b != std::string::npos);
    std::swap(text[at_a + 2], text[at_b + 2]);  // '0' <-> '1'
    {
      std::ofstream out(manifest_file, std::ios::binary | std::ios::trunc);
      out.write(text.data(), static_cast<std::streamsize>(text.size()));
    }
    for (const auto& message : {error_of([&] { ck::verify(written.path); }),
                                error_of([&] { ck::load(written.path, tiny_layout()); })}) {
      CHECK_THAT(message, Contains("checksum mismatch"));
      CHECK_THAT(message, Contains(manifest_file.string()));
    }
  }

  SECTION("a manifest rewritten whole with the names swapped: the shard checksums") {
    ck::Manifest swapped = original;
    int renamed = 0;
    for (auto& t : swapped.tensors) {
      if (t.role != ck::Role::param) continue;
      if (t.name == a) t.name = b, ++renamed;
      else if (t.name == b) t.name = a, ++renamed;
    }
    REQUIRE(renamed == 2);
    ck::write_manifest(manifest_file, swapped);  // a consistent manifest of its own
    for (const auto& message : {error_of([&] { ck::verify(written.path); }),
                                error_of([&] { ck::load(written.path, tiny_layout()); })}) {
      CHECK_THAT(message, Contains("checksum mismatch"));
      CHECK_THAT(message, Contains("params.bin"));
      CHECK_THAT(message, Contains("not those written for this tensor's name and shape"));
    }
    // Renamed to a name the model does not have: caught the same way, before the name.
    ck::Manifest renamed_one = original;
    for (auto& t : renamed_one.tensors)
      if (t.role == ck::Role::param && t.name == a) t.name = "h.0.attn.qkv.weight2";
    ck::write_manifest(manifest_file, renamed_one);
    CHECK_THAT(error_of([&] { ck::verify(written.path); }), Contains("checksum mismatch"));
  }

  SECTION("a format 1 checkpoint (checksums of the bytes alone) still loads") {
    ck::Manifest old = original;
    old.format_version = 1;
    const std::pair<ck::Role, const std::vector<float>*> roles[] = {
        {ck::Role::param, &snapshot.params}, {ck::Role::adam_m, &snapshot.adam_m},
        {ck::Role::adam_v, &snapshot.adam_v}};
    for (auto& t : old.tensors)
      for (const auto& [role, values] : roles)
        if (t.role == role)
          t.xxhash64 = XXH64(reinterpret_cast<const char*>(values->data()) + t.byte_offset,
                             t.slice_count * sizeof(float), 0);
    ck::write_manifest(manifest_file, old);
    const ck::Manifest read = ck::verify(written.path);
    CHECK(read.format_version == 1);
    CHECK(read.checksum == 0);
    CHECK(ck::load(written.path, tiny_layout()).params == snapshot.params);
  }
}
