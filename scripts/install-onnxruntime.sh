#!/usr/bin/env bash
# Installs ONNX Runtime for Node.js (npm's onnxruntime-node, pinned), the runtime the
# tests run dseek's ONNX export with (tests/unit/test_onnx_export.cpp), where they look
# for it: $DSEEK_ONNXRUNTIME_DIR, else $XDG_CACHE_HOME/dseek/onnxruntime, else
# ~/.cache/dseek/onnxruntime. --ignore-scripts: the package's install script downloads
# optional CUDA pieces from a host these machines cannot reach; the CPU runtime is
# inside the package. Idempotent. Usage: scripts/install-onnxruntime.sh [DIR]
set -euo pipefail

version=1.30.0
dir=${1:-${DSEEK_ONNXRUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dseek/onnxruntime}}
package=$dir/node_modules/onnxruntime-node/package.json
if [ -f "$package" ] && grep -q "\"version\": \"$version\"" "$package"; then
  echo "install-onnxruntime.sh: onnxruntime-node $version is installed in $dir"
  exit 0
fi
command -v npm >/dev/null || { echo "install-onnxruntime.sh: npm not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
echo "install-onnxruntime.sh: npm install onnxruntime-node@$version into $dir"
npm install --prefix "$dir" --ignore-scripts --no-audit --no-fund --loglevel=error \
  "onnxruntime-node@$version" >/dev/null
node -e "require('$dir/node_modules/onnxruntime-node')" \
  || { echo "install-onnxruntime.sh: onnxruntime-node does not load from $dir" >&2; exit 1; }
echo "install-onnxruntime.sh: onnxruntime-node $version installed in $dir"
