#!/usr/bin/env bash
# Puts what deploy/container/Containerfile copies into the image under OUT_DIR (default
# build/container/, inside the build context):
#   bin/  dseek-node, dseek and dseek-onnx-export (the program `dseek ckpt export --format
#         onnx` runs beside dseek), as scripts/build.sh built them (DSEEK_BUILD_DIR,
#         default build); their Debian libraries (libonnx1, libprotobuf32, ...) are in the
#         Containerfile's package list
#   lib/  the CUDA libraries they load from /usr/local/cuda (cudart, cuBLAS, cuBLASLt, NCCL:
#         ~780 MB), which are no Debian packages; empty for a build without CUDA
# Then, from the repository root:
#   podman build -f deploy/container/Containerfile -t dseek:0.1 .     # or: docker build ...
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=${DSEEK_BUILD_DIR:-build}
out=${1:-build/container}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for program in dseek-node dseek dseek-onnx-export; do
  if [ ! -x "$build_dir/bin/$program" ]; then
    echo "stage.sh: $build_dir/bin/$program is missing: run scripts/build.sh first" >&2
    exit 1
  fi
  cp "$build_dir/bin/$program" "$out/bin/"
done
# Every library they load from the CUDA tree, with the file its soname points to.
ldd "$out/bin/dseek-node" "$out/bin/dseek" "$out/bin/dseek-onnx-export" | awk '$3 ~ /^\/usr\/local\/cuda/ {print $3}' | sort -u |
  while read -r library; do
    cp -L "$library" "$out/lib/$(basename "$library")"
  done
echo "stage.sh: $out/bin: $(ls "$out/bin" | tr '\n' ' ')"
echo "stage.sh: $out/lib: $(ls "$out/lib" | tr '\n' ' ')($(du -sh "$out/lib" | cut -f1))"
