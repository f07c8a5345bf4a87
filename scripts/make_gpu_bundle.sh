#!/usr/bin/env bash
# Makes the portable GPU bundle that bench/gpu/check.sh runs on a GPU machine that has
# CUDA 13 (/usr/local/cuda), cmake and ninja but none of dseek's Debian libraries:
#
#   scripts/make_gpu_bundle.sh [OUT_DIR]        # default gpu-bundle/ (git-ignored)
#   DSEEK_BUNDLE_BUILD_DIR=build scripts/make_gpu_bundle.sh   # reuse a CUDA build tree
#
# It builds (Release, DSEEK_WITH_CUDA=ON; into build-gpu-bundle/ unless
# DSEEK_BUNDLE_BUILD_DIR says otherwise) gpt2_train, matmul_rate, dseek, dseek-node and,
# when the tree has it, dseek_gpu_tests, then copies into OUT_DIR:
#   bin/         the binaries
#   lib/         every shared library they load (ldd) that the GPU machine lacks: CAF,
#                UCX (and its transport modules, lib/ucx/), OpenSSL, Cap'n Proto, toml++,
#                OpenBLAS, gfortran, ...
#   lib/cudnn/   cuDNN's graph API and attention engines (dlopen'd; after the target's own
#                CUDA tree in the library path), left out if the archive would not fit
#   lib/stdcxx/  this machine's libstdc++ and libgcc_s, used only when the GPU machine's
#                are older than the binaries need (env.sh asks ldd)
#   env.sh       source it: sets LD_LIBRARY_PATH (bundle, then /usr/local/cuda) and
#                UCX_MODULE_DIR
#   MANIFEST.txt what is inside (commit, build, sizes, sha256) and what the target needs
# and the same folder compressed as OUT_DIR.tar.xz (about 1/4 of the size; carry either).
# Not bundled, since the GPU machine has them: glibc (libc, libm, libdl, libpthread, librt,
# ld-linux; the target needs a glibc at least as new as this machine's, 2.36 on Debian 12),
# the NVIDIA driver (libcuda) and the CUDA 13 libraries (cudart, cuBLAS, cuBLASLt, NCCL)
# from /usr/local/cuda. The compressed bundle must stay under 64 MiB (the device
# machine's carry limit): the script fails if it does not.
#
# On the GPU machine: bench/gpu/check.sh (it finds gpu-bundle/ at the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root=$(pwd)
out=${1:-gpu-bundle}
build_dir=${DSEEK_BUNDLE_BUILD_DIR:-build-gpu-bundle}
jobs=${DSEEK_BUILD_JOBS:-$(nproc)}
limit_bytes=$((64 * 1024 * 1024))

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSEEK_WITH_CUDA=ON
targets=(gpt2_train matmul_rate dseek dseek-node)
if ninja -C "$build_dir" -t targets all | grep -q '^dseek_gpu_tests:'; then
  targets+=(dseek_gpu_tests)
else
  echo "make_gpu_bundle: this tree has no dseek_gpu_tests target: the bundle has no parity tests"
fi
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/stdcxx" "$out/lib/ucx"
for t in "${targets[@]}"; do
  cp "$build_dir/bin/$t" "$out/bin/"
  strip --strip-unneeded "$out/bin/$t"  # symbol tables only: a third of the bytes
done

# Whether the GPU machine provides this library (so it stays out of the bundle).
provided_by_target() {
  local name=$1 path=$2
  case "$name" in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libutil.so*|libresolv.so*) return 0 ;;
    libcuda.so*|libnvidia-*) return 0 ;;  # the driver
  esac
  [[ $path == /usr/local/cuda* ]]  # the CUDA toolkit's libraries
}

# Copies the non-system dependencies of one ELF file (binary or UCX module).
bundle_dependencies_of() {
  local file=$1 name arrow path rest
  while read -r name arrow path rest; do
    [[ $arrow == "=>" ]] || continue
    if [[ $path == "not" ]]; then
      echo "make_gpu_bundle: $file needs $name, which is not found here" >&2; exit 1
    fi
    provided_by_target "$name" "$path" && continue
    case "$name" in
      libstdc++.so*|libgcc_s.so*) cp -L "$path" "$out/lib/stdcxx/$name" ;;
      *) [[ -e $out/lib/$name ]] || cp -L "$path" "$out/lib/$name" ;;
    esac
  done < <(ldd "$file")
}

for t in "${targets[@]}"; do bundle_dependencies_of "$out/bin/$t"; done
# UCX opens its transports as modules at run time (dseek-node's data plane); bring the
# ones whose own libraries this machine has, with those libraries.
ucx_modules=$(pkg-config --variable=libdir ucx 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)/ucx
if [[ -d $ucx_modules ]]; then
  for module in "$ucx_modules"/*.so.0; do
    # InfiniBand / RDMA transports (ib, rdmacm) have no use on a one-GPU machine and
    # bring 2.5 MiB of verbs libraries: shared memory (cma, and sysv/posix inside libuct)
    # and tcp remain.
    case "$(basename "$module")" in libuct_ib.*|libuct_rdmacm.*) continue ;; esac
    if ldd "$module" | grep -q "not found"; then continue; fi
    cp -L "$module" "$out/lib/ucx/"
    bundle_dependencies_of "$module"
  done
fi

# cuDNN (the fused bf16 attention, gpu/cudnn/): loaded at run time, so ldd does not list
# it. The GPU machine's own cuDNN is used when it has one (lib/cudnn comes after the CUDA
# tree in env.sh); these are the graph API, the runtime-compiled engines (the fused
# attention kernels, compiled with the target's NVRTC) and the heuristics. If the archive
# would exceed the carry limit with them, the heuristics and then all of them stay out
# (the binaries then run the tiled attention kernels where the target has no cuDNN).
cudnn_dir=$(dirname "$(readlink -f /usr/local/cuda/lib64/libcudnn_graph.so.9 2>/dev/null || echo /nonexistent/x)")
cudnn_libs=(libcudnn_graph.so.9 libcudnn_engines_runtime_compiled.so.9 libcudnn_heuristic.so.9)
if [[ -e $cudnn_dir/libcudnn_graph.so.9 ]]; then
  mkdir -p "$out/lib/cudnn"
  for l in "${cudnn_libs[@]}"; do [[ -e $cudnn_dir/$l ]] && cp -L "$cudnn_dir/$l" "$out/lib/cudnn/"; done
fi

cat >"$out/env.sh" <<'EOF'
# Source this file to run the bundle's binaries: the bundle's libraries first, then the
# CUDA 13 toolkit's. libstdc++ / libgcc_s of the build machine are added only when this
# machine's are older than the binaries need.
dseek_bundle_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$dseek_bundle_dir/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$dseek_bundle_dir/lib/cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$dseek_bundle_dir/lib/ucx"
if ldd "$dseek_bundle_dir/bin/gpt2_train" 2>&1 | grep -q "version \`\(GLIBCXX\|CXXABI\|GCC\)_"; then
  export LD_LIBRARY_PATH="$dseek_bundle_dir/lib/stdcxx:$LD_LIBRARY_PATH"
  echo "gpu-bundle: using the bundled libstdc++ (this machine's is older)" >&2
fi
for dseek_bundle_binary in "$dseek_bundle_dir"/bin/*; do
  if ldd "$dseek_bundle_binary" 2>&1 | grep -q "not found"; then
    echo "gpu-bundle: $(basename "$dseek_bundle_binary") misses libraries here:" >&2
    ldd "$dseek_bundle_binary" 2>&1 | grep "not found" >&2
  fi
done
unset dseek_bundle_binary
EOF

{
  echo "dseek GPU bundle: commit $(git -C "$repo_root" rev-parse --short HEAD)$(git -C "$repo_root" diff --quiet HEAD -- . ':!gpu-bundle' || echo '+changes'), built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "build machine: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n 1), $(/usr/local/cuda/bin/nvcc --version | grep release)"
  echo "CUDA code: $(grep -o 'code=\[[^]]*\]' "$build_dir/build.ninja" | sort -u | tr '\n' ' ')"
  echo "target needs: an NVIDIA driver for CUDA 13, CUDA 13 (cudart, cuBLAS, cuBLASLt) under /usr/local/cuda, glibc >= this machine's"
  echo "use: source env.sh (bench/gpu/check.sh does)"
  echo
  echo "bytes  sha256  file"
  (cd "$out" && find . -type f ! -name MANIFEST.txt | sort | while read -r f; do
     echo "$(stat -c %s "$f")  $(sha256sum "$f" | cut -c1-16)  ${f#./}"
   done)
} >"$out/MANIFEST.txt"

total=$(du -sb "$out" | cut -f1)
echo "make_gpu_bundle: $out: $(find "$out" -type f | wc -l) files, $((total / 1024 / 1024)) MiB"
# The same, compressed (OpenBLAS's 36 MB of kernels for every x86 core shrink ~8x): what
# travels to the device machine is this archive (check.sh unpacks OUT_DIR.tar.xz when the
# folder is absent); the folder itself is over the carry limit with OpenBLAS in it.
compress_bundle() {
  tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 >"$out.tar.xz"
  archive_bytes=$(stat -c %s "$out.tar.xz")
  echo "make_gpu_bundle: $out.tar.xz: $((archive_bytes / 1024 / 1024)) MiB"
}
compress_bundle
if ((archive_bytes >= limit_bytes)) && [[ -e $out/lib/cudnn/libcudnn_heuristic.so.9 ]]; then
  echo "make_gpu_bundle: over the limit with cuDNN's heuristics library: leaving it out"
  rm "$out/lib/cudnn/libcudnn_heuristic.so.9"
  echo "left out after the listing above (carry limit): lib/cudnn/libcudnn_heuristic.so.9" >>"$out/MANIFEST.txt"
  compress_bundle
fi
if ((archive_bytes >= limit_bytes)) && [[ -d $out/lib/cudnn ]]; then
  echo "make_gpu_bundle: over the limit with cuDNN: leaving it out (the target's own cuDNN, or the tiled attention)"
  rm -r "$out/lib/cudnn"
  echo "left out after the listing above (carry limit): lib/cudnn/" >>"$out/MANIFEST.txt"
  compress_bundle
fi
if ((archive_bytes >= limit_bytes)); then
  echo "make_gpu_bundle: $out.tar.xz is over 64 MiB: too large to carry to the device machine" >&2
  exit 1
fi
