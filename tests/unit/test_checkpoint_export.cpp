// The safetensors export read back by an independent parser (Python's json + struct,
// the way the format is specified), and the config side of checkpoints: the new keys
// and the one fault kind this build injects.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "runtime/checkpoint/safetensors.hpp"
#include "runtime/checkpoint/write.hpp"
#include "runtime/config/load.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace ck = dseek::checkpoint;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using dseek::testing::run_process;
using dseek::testing::ScratchDir;
using namespace std::chrono_literals;

TEST_CASE("checkpoint: safetensors export reads back in Python", "[checkpoint][export]") {
  ScratchDir dir("ckpt-export");
  const dseek::model::ParamLayout layout(dseek::model::GptShape{16, 1, 2, 8, 32});
  ck::Snapshot s;
  s.step = 3;
  s.tensors = layout.tensors();
  for (auto* buffer : {&s.params, &s.adam_m, &s.adam_v}) buffer->assign(layout.total(), 0.5f);
  for (size_t i = 0; i < layout.total(); ++i) s.params[i] = static_cast<float>(i) * 0.25f;
  auto written = ck::write_checkpoint(s, {dir.path(), 3, false});
  const fs::path out = dir / "model.safetensors";
  CHECK(ck::export_safetensors(written.path, out) == layout.tensors().size());

  // wpe is [context=8, C=16]; its element [2][3] is flat element wpe.offset + 2*16 + 3.
  const auto& wpe = layout.tensors()[1];
  REQUIRE(wpe.name == "wpe");
  const std::string script =
      "import json, struct, sys\n"
      "data = open(sys.argv[1], 'rb').read()\n"
      "n = struct.unpack('<Q', data[:8])[0]\n"
      "header = json.loads(data[8:8 + n])\n"
      "t = header['wpe']\n"
      "assert t['dtype'] == 'F32' and t['shape'] == [8, 16], t\n"
      "b, e = t['data_offsets']\n"
      "values = struct.unpack('<%df' % ((e - b) // 4), data[8 + n + b:8 + n + e])\n"
      "assert values[2 * 16 + 3] == float(sys.argv[2]), values[2 * 16 + 3]\n"
      "names = [k for k in header if k != '__metadata__']\n"
      "print('tensors', len(names), 'step', header['__metadata__']['step'], 'value ok')\n";
  // A multiple of 0.25 is exact in fp32 and in its decimal text.
  const double expected = static_cast<double>(wpe.offset + 2 * 16 + 3) * 0.25;
  auto result =
      run_process({"/usr/bin/python3", "-c", script, out.string(), std::to_string(expected)}, 60s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output,
             Contains("tensors " + std::to_string(layout.tensors().size()) + " step 3 value ok"));
}

TEST_CASE("config: checkpoint keys and the fail_checkpoint_write fault", "[config][checkpoint]") {
  auto job = dseek::config::load_config_text(
      "[train]\nstop_after_steps = 8\nstop_after_minutes = 1.5\n"
      "[checkpoint]\nevery_steps = 5\nresume = \"latest\"\nasync = false\n"
      "[[faults]]\nkind = \"fail_checkpoint_write\"\nstep = 10\n",
      "ck.toml");
  CHECK(job.train.stop_after_steps == 8);
  CHECK(job.train.stop_after_minutes == 1.5);
  CHECK(job.checkpoint.every_steps == 5);
  CHECK(job.checkpoint.resume == "latest");
  CHECK_FALSE(job.checkpoint.async);
  CHECK_NOTHROW(dseek::config::check_supported(job));
  auto again = dseek::config::load_config_text(dseek::config::to_toml(job), "again");
  CHECK(dseek::config::to_toml(again) == dseek::config::to_toml(job));

  auto other = dseek::config::load_config_text(
      "[[faults]]\nkind = \"fail_checkpoint_write\"\nstep = 1\n"
      "[[faults]]\nkind = \"fail_checkpoint_write\"\nafter_seconds = 2\n", "x");
  try {
    dseek::config::check_supported(other);
    FAIL("a timed fail_checkpoint_write fault was accepted");
  } catch (const dseek::config::ConfigError& error) {
    CHECK_THAT(std::string(error.what()),
               Contains("this job cannot run") && Contains("fail_checkpoint_write at a step only"));
  }
}
