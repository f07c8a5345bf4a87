// Reading and writing manifest.capnp (see manifest.hpp). The only checkpoint file that
// sees Cap'n Proto, which keeps its headers out of everything else.
#include "runtime/checkpoint/manifest.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/file_ops.hpp"
#include "schemas/checkpoint_manifest.capnp.h"

namespace dseek::checkpoint {
namespace {

// One entry per tensor shard: anything bigger is not a manifest.
constexpr size_t kMaxManifestBytes = 64u << 20;

schema::TensorRole to_schema(Role role) {
  switch (role) {
    case Role::param: return schema::TensorRole::PARAM;
    case Role::adam_m: return schema::TensorRole::ADAM_M;
    case Role::adam_v: return schema::TensorRole::ADAM_V;
  }
  return schema::TensorRole::UNKNOWN;
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// A streaming XXH64 over the fields of a manifest, each length-prefixed where its size
// varies, so that no two different manifests feed it the same bytes.
class FieldHash {
 public:
  explicit FieldHash(uint64_t seed) : state_(XXH64_createState(), &XXH64_freeState) {
    if (!state_ || XXH64_reset(state_.get(), seed) != XXH_OK) throw CheckpointError("xxhash: out of memory");
  }
  template <typename T>
  FieldHash& add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    XXH64_update(state_.get(), &value, sizeof value);
    return *this;
  }
  FieldHash& add(const std::string& text) {
    add(static_cast<uint64_t>(text.size()));
    XXH64_update(state_.get(), text.data(), text.size());
    return *this;
  }
  template <typename T>
  FieldHash& add(const std::vector<T>& values) {
    add(static_cast<uint64_t>(values.size()));
    for (const T& v : values) add(v);
    return *this;
  }
  uint64_t digest() const { return XXH64_digest(state_.get()); }

 private:
  std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> state_;
};

Manifest parse(kj::ArrayPtr<const capnp::word> words, const std::string& where, bool check_checksum) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() * 2 + 1024;
  capnp::FlatArrayMessageReader message(words, options);
  auto in = message.getRoot<schema::CheckpointManifest>();
  auto bad = [&](const std::string& why) {
    return CheckpointError("malformed checkpoint manifest " + where + ": " + why);
  };
  Manifest m;
  m.format_version = in.getFormatVersion();
  if (m.format_version < kOldestFormatVersion || m.format_version > kFormatVersion) {
    throw bad("format version " + std::to_string(m.format_version) + ", this build reads " +
              std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion));
  }
  m.step = in.getStep();
  m.optimizer_steps = in.getOptimizerSteps();
  auto layout = in.getLayout();
  m.world_size = layout.getWorldSize();
  m.data_parallel = layout.getDataParallel();
  m.tensor_parallel = layout.getTensorParallel();
  m.pipeline_parallel = layout.getPipelineParallel();
  m.zero_stage = layout.getZeroStage();
  m.config_toml = in.getConfigToml().cStr();
  m.seed = in.getData().getSeed();
  m.next_step = in.getData().getNextStep();
  m.precision.loss_scale = in.getLossScale();
  if (in.hasPrecision()) {  // absent in checkpoints written before it existed
    auto precision = in.getPrecision();
    m.precision.precision = precision.getPrecision().cStr();
    m.precision.loss_scale_good_steps = precision.getLossScaleGoodSteps();
    auto& fp8 = m.precision.fp8;
    fp8.replicas = std::max<int64_t>(precision.getFp8Replicas(), 1);
    fp8.history_length = precision.getFp8AmaxHistoryLength();
    for (float amax : precision.getFp8AmaxHistories()) fp8.histories.push_back(amax);
    for (float scale : precision.getFp8Scales()) fp8.scales.push_back(scale);
    if (fp8.history_length < 0 || fp8.scales.size() % static_cast<uint64_t>(fp8.replicas) != 0 ||
        fp8.histories.size() != fp8.scales.size() * static_cast<uint64_t>(fp8.history_length))
      throw bad("fp8 amax histories: " + std::to_string(fp8.histories.size()) + " values for " +
                std::to_string(fp8.scales.size()) + " scales of " +
                std::to_string(fp8.replicas) + " replica(s), history " +
                std::to_string(fp8.history_length));
  }
  m.created_unix_s = in.getCreatedUnixS();
  if (m.step < 0 || m.world_size == 0) throw bad("step or world size out of range");
  std::map<std::string, uint64_t> file_bytes;
  for (auto file : in.getFiles()) {
    DataFile entry{file.getName().cStr(), file.getBytes()};
    if (!is_plain_file_name(entry.name)) throw bad("data file '" + entry.name + "' is not a plain name");
    file_bytes[entry.name] = entry.bytes;
    m.files.push_back(std::move(entry));
  }
  for (auto shard : in.getTensors()) {
    TensorShard t;
    t.name = shard.getName().cStr();
    switch (shard.getRole()) {
      case schema::TensorRole::PARAM: t.role = Role::param; break;
      case schema::TensorRole::ADAM_M: t.role = Role::adam_m; break;
      case schema::TensorRole::ADAM_V: t.role = Role::adam_v; break;
      default: throw bad("tensor " + t.name + " has an unknown role");
    }
    if (shard.getDtype() != schema::TensorDtype::F32_LE) {
      throw bad("tensor " + t.name + " is not f32le, the only dtype this build reads");
    }
    uint64_t bytes = sizeof(float);  // the full tensor's, overflow checked
    for (int64_t d : shard.getShape()) {
      if (d < 0) throw bad("tensor " + t.name + " has a negative dimension");
      t.shape.push_back(d);
      if (d != 0 && bytes > UINT64_MAX / static_cast<uint64_t>(d))
        throw bad("tensor " + t.name + " has a shape whose element count overflows 64 bits");
      bytes *= static_cast<uint64_t>(d);
    }
    t.slice_offset = shard.getSliceOffset();
    t.slice_count = shard.getSliceCount();
    t.file = shard.getFile().cStr();
    t.byte_offset = shard.getByteOffset();
    t.xxhash64 = shard.getXxhash64();
    if (t.slice_offset > t.full_count() || t.slice_count > t.full_count() - t.slice_offset) {
      throw bad("tensor " + t.name + " slice [" + std::to_string(t.slice_offset) + ", +" +
                std::to_string(t.slice_count) + ") lies outside its " +
                std::to_string(t.full_count()) + " elements");
    }
    auto file = file_bytes.find(t.file);
    if (file == file_bytes.end()) throw bad("tensor " + t.name + " is in unlisted file " + t.file);
    if (t.slice_count > UINT64_MAX / 4 || t.byte_offset > file->second ||
        t.slice_count * 4 > file->second - t.byte_offset) {
      throw bad("tensor " + t.name + " lies outside its file " + t.file);
    }
    m.tensors.push_back(std::move(t));
  }
  if (m.format_version >= 2) {
    m.checksum = in.getManifestXxhash64();
    if (check_checksum && m.checksum != manifest_checksum(m)) {
      throw bad("checksum mismatch: the manifest was changed after it was written (a tensor "
                "entry renamed, swapped or resized) or is corrupt");
    }
  }
  return m;
}

}  // namespace

const char* role_name(Role role) {
  switch (role) {
    case Role::param: return "param";
    case Role::adam_m: return "adam_m";
    case Role::adam_v: return "adam_v";
  }
  return "?";
}

uint64_t shard_checksum(const TensorShard& t, const void* bytes, size_t size, uint32_t format_version) {
  if (format_version < 2) return XXH64(bytes, size, 0);
  FieldHash identity(0);
  identity.add(t.name).add(static_cast<uint32_t>(t.role)).add(std::string("f32le")).add(t.shape)
      .add(t.slice_offset).add(t.slice_count);
  return XXH64(bytes, size, identity.digest());
}

uint64_t manifest_checksum(const Manifest& m) {
  FieldHash h(0x6473656b6d616e69ULL);  // "dseekmani"
  h.add(m.format_version).add(m.step).add(m.optimizer_steps).add(m.world_size).add(m.data_parallel)
      .add(m.tensor_parallel).add(m.pipeline_parallel).add(m.zero_stage).add(m.config_toml)
      .add(m.seed).add(m.next_step).add(m.created_unix_s);
  const PrecisionState& p = m.precision;
  h.add(p.precision).add(p.loss_scale).add(p.loss_scale_good_steps).add(p.fp8.replicas)
      .add(p.fp8.history_length).add(p.fp8.histories).add(p.fp8.scales);
  h.add(static_cast<uint64_t>(m.tensors.size()));
  for (const TensorShard& t : m.tensors) {
    h.add(t.name).add(static_cast<uint32_t>(t.role)).add(t.shape).add(t.slice_offset)
        .add(t.slice_count).add(t.file).add(t.byte_offset).add(t.xxhash64);
  }
  h.add(static_cast<uint64_t>(m.files.size()));
  for (const DataFile& f : m.files) h.add(f.name).add(f.bytes);
  return h.digest();
}

uint64_t TensorShard::full_count() const {
  uint64_t count = 1;
  for (int64_t d : shape) count *= static_cast<uint64_t>(d);
  return count;
}

void write_manifest(const std::filesystem::path& path, const Manifest& m) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::CheckpointManifest>();
  out.setFormatVersion(m.format_version);
  out.setStep(m.step);
  out.setOptimizerSteps(m.optimizer_steps);
  auto layout = out.initLayout();
  layout.setWorldSize(m.world_size);
  layout.setDataParallel(m.data_parallel);
  layout.setTensorParallel(m.tensor_parallel);
  layout.setPipelineParallel(m.pipeline_parallel);
  layout.setZeroStage(m.zero_stage);
  out.setConfigToml(m.config_toml);
  auto data = out.initData();
  data.setSeed(m.seed);
  data.setNextStep(m.next_step);
  out.setLossScale(m.precision.loss_scale);
  auto precision = out.initPrecision();
  precision.setPrecision(m.precision.precision);
  precision.setLossScaleGoodSteps(m.precision.loss_scale_good_steps);
  precision.setFp8Replicas(static_cast<uint32_t>(m.precision.fp8.replicas));
  precision.setFp8AmaxHistoryLength(m.precision.fp8.history_length);
  const auto& histories = m.precision.fp8.histories;
  auto amaxes = precision.initFp8AmaxHistories(static_cast<unsigned>(histories.size()));
  for (size_t i = 0; i < histories.size(); ++i) amaxes.set(static_cast<unsigned>(i), histories[i]);
  const auto& fp8_scales = m.precision.fp8.scales;
  auto scales = precision.initFp8Scales(static_cast<unsigned>(fp8_scales.size()));
  for (size_t i = 0; i < fp8_scales.size(); ++i) scales.set(static_cast<unsigned>(i), fp8_scales[i]);
  out.setCreatedUnixS(m.created_unix_s);
  auto tensors = out.initTensors(static_cast<unsigned>(m.tensors.size()));
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorShard& t = m.tensors[i];
    auto entry = tensors[static_cast<unsigned>(i)];
    entry.setName(t.name);
    entry.setRole(to_schema(t.role));
    entry.setDtype(schema::TensorDtype::F32_LE);
    auto shape = entry.initShape(static_cast<unsigned>(t.shape.size()));
    for (size_t d = 0; d < t.shape.size(); ++d) shape.set(static_cast<unsigned>(d), t.shape[d]);
    entry.setSliceOffset(t.slice_offset);
    entry.setSliceCount(t.slice_count);
    entry.setFile(t.file);
    entry.setByteOffset(t.byte_offset);
    entry.setXxhash64(t.xxhash64);
  }
  auto files = out.initFiles(static_cast<unsigned>(m.files.size()));
  for (size_t i = 0; i < m.files.size(); ++i) {
    files[static_cast<unsigned>(i)].setName(m.files[i].name);
    files[static_cast<unsigned>(i)].setBytes(m.files[i].bytes);
  }
  if (m.format_version >= 2) {
    // The checksum of the manifest as a reader will see it (parse normalizes a few
    // fields), stored in the message itself.
    auto draft = capnp::messageToFlatArray(message);
    out.setManifestXxhash64(manifest_checksum(parse(draft.asPtr(), path.string(), false)));
  }
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  io::OutputFile file(path);
  file.write(bytes.begin(), bytes.size());
  file.sync_and_close();
}

Manifest read_manifest(const std::filesystem::path& dir) {
  const auto path = dir / kManifestFile;
  const std::string where = path.string();
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw CheckpointError("missing checkpoint manifest " + where);
  }
  std::vector<char> bytes = io::read_whole(path);
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0 || bytes.size() > kMaxManifestBytes) {
    throw CheckpointError("malformed checkpoint manifest " + where + ": " +
                          std::to_string(bytes.size()) + " bytes is not a Cap'n Proto message");
  }
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    return parse(words.asPtr(), where, true);
  } catch (const kj::Exception& exception) {
    throw CheckpointError("malformed checkpoint manifest " + where + ": " +
                          exception.getDescription().cStr());
  }
}

}  // namespace dseek::checkpoint
