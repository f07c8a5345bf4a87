// Implementation of openblas_kernel.hpp.
#include "runtime/backend/openblas_kernel.hpp"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace dseek::backend {

namespace {

// Set in the re-executed process: the choice was dseek's, not OpenBLAS's.
constexpr const char* kChosenMark = "DSEEK_OPENBLAS_CORETYPE_CHOSEN";

// Runs before main (the library's OpenBLAS has been loaded and has chosen by then).
__attribute__((constructor)) void run_the_kernels_this_cpu_allows() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  if (std::strcmp(openblas_get_corename(), "Prescott") != 0) return;
  const char* kernels = openblas_kernels_for_this_cpu();
  if (*kernels == '\0') return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<char*> argv;
  for (size_t at = 0; at < cmdline.size(); at += std::strlen(cmdline.c_str() + at) + 1)
    argv.push_back(const_cast<char*>(cmdline.c_str() + at));
  if (argv.empty()) return;
  argv.push_back(nullptr);
  ::setenv("OPENBLAS_CORETYPE", kernels, 1);
  ::setenv(kChosenMark, "1", 1);
  ::execv("/proc/self/exe", argv.data());
  // The exec failed: go on with Prescott here (children get the better kernels).
  ::unsetenv(kChosenMark);
}

}  // namespace

const char* openblas_kernels_for_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16")) return "COOPERLAKE";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SKYLAKEX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "HASWELL";
  return "";
}

std::string openblas_kernels() {
  std::string kernels = "OpenBLAS " + std::string(openblas_get_corename());
  if (std::getenv(kChosenMark) != nullptr)
    kernels += " (OPENBLAS_CORETYPE set by dseek: OpenBLAS had fallen back to Prescott)";
  return kernels;
}

}  // namespace dseek::backend
