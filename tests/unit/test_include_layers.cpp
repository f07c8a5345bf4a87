// The direction of the arrows between the source folders (DESIGN.md, README "Layout"):
// apps -> actors -> dist -> (runtime, comm, gpu) -> libraries, gpu implementing the
// runtime's backend interface. This test reads every #include of every source file and
// fails on one that points against the direction, naming the file, the line and the
// include. The allowed arrows are written down here and nowhere else: kLayers says which
// project folders each folder may include, kLibraries which folders may include a
// library's headers (CAF only in actors and apps; UCX and NCCL only in comm; CUDA only
// in gpu, comm's NCCL backend and the GPU benchmarks).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/test_paths.hpp"

namespace fs = std::filesystem;

namespace {

// Each source folder and the project folders its files may include ("" for itself
// implied). A folder missing here is not checked; every folder of the layout is.
const std::map<std::string, std::set<std::string>> kLayers = {
    {"schemas", {}},
    {"runtime", {"schemas"}},
    {"comm", {}},
    {"gpu", {"runtime"}},
    {"dist", {"runtime", "comm"}},
    {"actors", {"dist", "runtime", "comm", "gpu"}},
    {"apps", {"actors", "dist", "runtime", "comm", "gpu"}},
    {"bench", {"runtime", "comm", "gpu"}},
};

// A library's header prefixes and the folders (or sub-folders) that may include them.
struct Library {
  std::vector<std::string> prefixes;
  std::vector<std::string> folders;
};
const Library kLibraries[] = {
    {{"caf/"}, {"actors", "apps"}},
    {{"ucp/", "ucs/", "uct/"}, {"comm/ucx"}},
    {{"nccl.h"}, {"comm/nccl"}},
    {{"oneapi/dnnl/", "omp.h"}, {"runtime/backend"}},  // the CPU backend's bf16 matmuls
    {{"onnx/", "google/protobuf/"}, {"runtime/export"}},  // the ONNX export's protobuf classes
    {{"cuda", "cublas", "cudnn", "curand"}, {"gpu", "comm/nccl", "bench/gpu"}},
};

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool is_source(const fs::path& path) {
  static const std::set<std::string> extensions = {".cpp", ".hpp", ".h", ".cu", ".cuh"};
  return extensions.count(path.extension().string()) > 0;
}

struct Include {
  std::string target;  // between the quotes or angle brackets
  bool quoted = false;
  int line = 0;
};

std::vector<Include> includes_of(const fs::path& file) {
  std::vector<Include> found;
  std::ifstream in(file);
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    const auto hash = text.find_first_not_of(" \t");
    if (hash == std::string::npos || text[hash] != '#') continue;
    const auto word = text.find("include", hash);
    if (word == std::string::npos) continue;
    const auto open = text.find_first_of("\"<", word);
    if (open == std::string::npos) continue;
    const char close = text[open] == '"' ? '"' : '>';
    const auto end = text.find(close, open + 1);
    if (end == std::string::npos) continue;
    found.push_back({text.substr(open + 1, end - open - 1), text[open] == '"', line});
  }
  return found;
}

// What is wrong with `include` in `file` of folder `layer` ("" when it is allowed).
std::string violation(const fs::path& root, const fs::path& file, const std::string& layer,
                      const Include& include) {
  const std::string relative = fs::relative(file, root).generic_string();
  if (!include.quoted) {
    for (const Library& library : kLibraries) {
      const bool matches = std::any_of(library.prefixes.begin(), library.prefixes.end(),
                                       [&](const std::string& p) { return starts_with(include.target, p); });
      if (!matches) continue;
      const bool allowed = std::any_of(library.folders.begin(), library.folders.end(),
                                       [&](const std::string& f) { return starts_with(relative, f + "/"); });
      if (!allowed) return "a library header only its own layer may include";
    }
    return "";
  }
  const std::string first = include.target.substr(0, include.target.find('/'));
  if (first == layer) return "";
  if (kLayers.count(first) > 0) {
    const auto& allowed = kLayers.at(layer);
    return allowed.count(first) > 0 ? "" : "an arrow from " + layer + "/ to " + first + "/";
  }
  // Not a layer's path: a file beside the includer, or under its folder's own include
  // root (apps/ puts apps/ on its path: "dseek/launch/...").
  if (fs::exists(file.parent_path() / include.target) || fs::exists(root / layer / include.target))
    return "";
  // A header the build generates (Cap'n Proto's *.capnp.h from schemas/; the version
  // and commit of cmake/BuildInfo.cmake).
  if (include.target.size() > 8 && include.target.substr(include.target.size() - 8) == ".capnp.h")
    return "";
  if (include.target == "dseek_build_info.hpp") return "";
  return "an include that is no file of the project";
}

}  // namespace

TEST_CASE("includes point one way: apps -> actors -> dist -> runtime, comm, gpu",
          "[layout][unit]") {
  const fs::path root = dseek::testing::source_dir();
  size_t files = 0, checked = 0;
  std::vector<std::string> problems;
  for (const auto& [layer, allowed] : kLayers) {
    const fs::path folder = root / layer;
    REQUIRE(fs::is_directory(folder));
    for (const auto& entry : fs::recursive_directory_iterator(folder)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      ++files;
      for (const Include& include : includes_of(entry.path())) {
        ++checked;
        const std::string why = violation(root, entry.path(), layer, include);
        if (!why.empty())
          problems.push_back(fs::relative(entry.path(), root).generic_string() + ":" +
                             std::to_string(include.line) + ": #include " +
                             (include.quoted ? "\"" + include.target + "\"" : "<" + include.target + ">") +
                             ": " + why);
      }
    }
  }
  INFO(files << " files, " << checked << " includes read");
  CHECK(files > 300);  // the tree was read (413 source files on 2026-12-01)
  std::string report;
  for (const auto& problem : problems) report += problem + "\n";
  INFO(report);
  CHECK(problems.empty());
}

TEST_CASE("the include check catches an arrow against the direction", "[layout][unit]") {
  // A runtime file that includes an actor, and a comm file that includes CAF, in a
  // scratch tree shaped like the repository: both are named.
  dseek::testing::ScratchDir scratch("include-layers");
  const fs::path root = scratch.path();
  fs::create_directories(root / "runtime/train");
  fs::create_directories(root / "actors/node");
  fs::create_directories(root / "comm/ucx");
  std::ofstream(root / "actors/worker_group/worker.hpp") << "#pragma once\n";
  std::ofstream(root / "runtime/train/trainer.hpp") << "#pragma once\n#include \"actors/worker_group/worker.hpp\"\n";
  std::ofstream(root / "comm/ucx/link.hpp") << "#pragma once\n#include <caf/all.hpp>\n#include <ucp/api/ucp.h>\n";
  const auto runtime_file = root / "runtime/train/trainer.hpp";
  const auto runtime_includes = includes_of(runtime_file);
  REQUIRE(runtime_includes.size() == 1);
  CHECK(violation(root, runtime_file, "runtime", runtime_includes[0]) == "an arrow from runtime/ to actors/");
  const auto comm_file = root / "comm/ucx/link.hpp";
  const auto comm_includes = includes_of(comm_file);
  REQUIRE(comm_includes.size() == 2);
  CHECK(violation(root, comm_file, "comm", comm_includes[0]) ==
        "a library header only its own layer may include");
  CHECK(violation(root, comm_file, "comm", comm_includes[1]).empty());
  // The other way is allowed.
  std::ofstream(root / "actors/node/uses_runtime.hpp") << "#include \"runtime/train/trainer.hpp\"\n";
  const auto actor_file = root / "actors/node/uses_runtime.hpp";
  CHECK(violation(root, actor_file, "actors", includes_of(actor_file).at(0)).empty());
}
