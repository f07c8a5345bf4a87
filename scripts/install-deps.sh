#!/usr/bin/env bash
# Installs the Debian 12 packages that dseek's build, tests and benchmarks need.
# Idempotent: packages already present are skipped, and apt is only touched when
# something is missing. Every profile then installs the tokenizers' rank files
# (scripts/install-tokenizers.sh: npm's js-tiktoken, also the tests' reference).
# Usage: scripts/install-deps.sh [build|test|bench]
#   build  compiler, CMake, the libraries and the tokenizers (default)
#   test   build + PyTorch (the numerical reference of the tests), Slurm and munge (the
#          real-Slurm tests, label slurm), python3-yaml (the deploy/ manifests' tests),
#          prometheus (promtool and the server: the alert rules' tests, the Prometheus
#          integration test), chromium (the HTML report's test in headless Chromium),
#          clang-14 with libFuzzer (the fuzz targets, label fuzz) and python3-onnx and
#          ONNX Runtime (the ONNX export's tests)
#   bench  test + the peers the benchmarks run side by side (OpenMPI)
set -euo pipefail

profile=${1:-build}
build_pkgs=(g++ make cmake pkgconf ninja-build ccache git
            libcaf-dev libssl-dev libucx-dev ucx-utils libcapnp-dev capnproto
            libtomlplusplus-dev catch2 libopenblas-dev libdnnl-dev libxxhash-dev
            libutf8proc-dev libzstd-dev zlib1g-dev libsimdjson-dev libsentencepiece-dev
            libonnx-dev libprotobuf-dev
            sentencepiece nodejs
            libpython3.11-stdlib)  # its Python sources are the default training text
test_pkgs=(python3 python3-torch python3-numpy slurm-wlm munge python3-yaml
           prometheus chromium chromium-driver python3-onnx
           clang-14 libclang-rt-14-dev lld-14)  # libFuzzer, the sanitizers, lld (scripts/fuzz.sh)
bench_pkgs=(libopenmpi-dev openmpi-bin)

wanted=("${build_pkgs[@]}")
case "$profile" in
  build) ;;
  test) wanted+=("${test_pkgs[@]}") ;;
  bench) wanted+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "install-deps.sh: unknown profile '$profile' (build|test|bench)" >&2; exit 2 ;;
esac

missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Some Node.js builds (NodeSource's) bring their own npm; Debian's comes apart.
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps.sh: all ${#wanted[@]} packages of profile '$profile' are present"
else
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  echo "install-deps.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
"$(dirname "$0")/install-tokenizers.sh"
# The tests run the ONNX export in ONNX Runtime (npm's onnxruntime-node).
[ "$profile" = build ] || "$(dirname "$0")/install-onnxruntime.sh"
