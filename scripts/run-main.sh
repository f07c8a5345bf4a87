#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs what the build needs, builds,
# prepares the default training text (the Python standard library's sources, from
# Debian's libpython3.11-stdlib) once, and trains the default config data-parallel on
# two local nodes (`dseek launch --nodes 2`; DSEEK_NODES=N for another count, N dividing
# train.batch_size = 16), with a checkpoint every 100 steps and at the end (it says how
# to resume: `scripts/run-main.sh --resume latest --set train.steps=600`).
# Extra arguments go to `dseek launch`, e.g. `scripts/run-main.sh --set train.steps=50`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build
scripts/build.sh
bin=${DSEEK_BUILD_DIR:-build}/bin  # where scripts/build.sh put the binaries
data_dir=data/python-stdlib
if [ ! -f "$data_dir/index.capnp" ]; then
  rm -rf "$data_dir"
  "$bin/dseek" data prepare --input /usr/lib/python3.11 --output "$data_dir"
fi
exec "$bin/dseek" launch --nodes "${DSEEK_NODES:-2}" config/single.toml "$@"
