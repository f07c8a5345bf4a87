// The OpenBLAS kernels a dseek process runs (runtime/backend/openblas_kernel.hpp): where
// OpenBLAS falls back to Prescott on a CPU it does not know, dseek runs the kernels the
// CPU's instructions allow; a user's OPENBLAS_CORETYPE is kept. Seen as `dseek bench
// gemm` reports it (its matmul_kernels field), started with a clean environment.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string>

#include "runtime/backend/openblas_kernel.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// `dseek bench gemm` on a small matrix, with OPENBLAS_CORETYPE unset or set to `kernels`.
std::string gemm_report(const std::string& kernels) {
  std::vector<std::string> argv{"env", "-u", "OPENBLAS_CORETYPE", "-u",
                                "DSEEK_OPENBLAS_CORETYPE_CHOSEN"};
  if (!kernels.empty()) argv.push_back("OPENBLAS_CORETYPE=" + kernels);
  argv.push_back(bin("dseek"));
  for (const char* arg : {"bench", "gemm", "--threads", "1", "--size", "64", "--reps", "1"})
    argv.push_back(arg);
  const auto result = run_process(argv, 60s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return string_field(result.output, "matmul_kernels");
}

}  // namespace

TEST_CASE("dseek runs the OpenBLAS kernels the CPU allows where OpenBLAS falls back to Prescott",
          "[backend][openblas]") {
  const std::string allowed = dseek::backend::openblas_kernels_for_this_cpu();
  const std::string report = gemm_report("");
  INFO(report << "; this CPU allows: " << (allowed.empty() ? "nothing beyond Prescott" : allowed));
  if (allowed.empty()) {
    SUCCEED("this CPU has neither AVX2 nor AVX-512: Prescott is what it runs");
    return;
  }
  CHECK(report.find("OpenBLAS Prescott") == std::string::npos);
  // Chosen by dseek only after OpenBLAS fell back, and then the CPU's own.
  if (report.find("set by dseek") != std::string::npos)
    CHECK(lower(report).find("openblas " + lower(allowed)) != std::string::npos);
}

TEST_CASE("a user's OPENBLAS_CORETYPE is kept", "[backend][openblas]") {
  const std::string report = gemm_report("PRESCOTT");
  CHECK(report.find("fp32: OpenBLAS Prescott;") != std::string::npos);
  CHECK(report.find("set by dseek") == std::string::npos);
}
