# Helpers the side-by-side benchmark scripts share (sourced, after `py` is set to the
# Python that sees Debian's python3-torch).

# The median of the numbers given as arguments.
median() { "$py" -c 'import sys, statistics; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }

# The largest of the numbers given as arguments.
max() { "$py" -c 'import sys; print(max(map(float, sys.argv[1:])))' "$@"; }

# tokens_per_s from the last JSON line of a run's stdout.
tps() { "$py" -c 'import sys, json; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["tokens_per_s"])'; }

# "dim layers heads context vocab batch data_dir" of a dseek config, with dseek's
# defaults (config/REFERENCE.md); data_dir is "-" when the config has none.
model_shape() {
  "$py" - "$1" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
m, t, d = c.get("model", {}), c.get("train", {}), c.get("data", {})
print(m.get("dim", 256), m.get("layers", 4), m.get("heads", 4), m.get("context", 128),
      m.get("vocab", 256), t.get("batch_size", 16), d.get("dir", "-"))
PY
}

# dseek runs the OpenBLAS kernels the CPU allows where OpenBLAS falls back to Prescott
# (runtime/backend/openblas_kernel.hpp); with OPENBLAS_CORETYPE unset, the peer (and an
# old dseek build) get the same kernels through the variable.
if [[ -z ${OPENBLAS_CORETYPE+x} && -x ${DSEEK_BIN:-build/bin/dseek} ]]; then
  openblas_chosen=$("${DSEEK_BIN:-build/bin/dseek}" bench gemm --threads 1 --size 16 --reps 1 2>/dev/null |
                    sed -n 's/.*"fp32: OpenBLAS \([A-Za-z0-9]*\).*/\1/p')
  if [[ -n $openblas_chosen ]]; then export OPENBLAS_CORETYPE=$openblas_chosen; fi
fi

# The header lines every result block starts with: the machine and the BLAS kernel
# (the same environment for dseek and its peer).
machine_line() { echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc)$*"; }
blas_line() {
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset: auto-detected>} for both sides;" \
       "kernel: $("$py" -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())' 2>/dev/null || echo unknown)"
}

# The options of the training benches (train_vs_pytorch, bf16_vs_torch, recompute):
# --config --threads --runs --steps over the caller's defaults in those variables; -h
# prints lines $HELP_LINES (e.g. 2,12) of the calling script. Then checks the dseek
# binary ($DSEEK_BIN or build/bin/dseek) and sets $dseek.
parse_train_bench_args() {
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --config) config=$2; shift 2 ;;
      --threads) threads=$2; shift 2 ;;
      --runs) runs=$2; shift 2 ;;
      --steps) steps=$2; shift 2 ;;
      -h|--help) sed -n "${HELP_LINES}p" "$0"; exit 0 ;;
      *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
  done
  dseek=${DSEEK_BIN:-build/bin/dseek}
  [[ -x $dseek ]] || { echo "dseek binary not found: $dseek (set DSEEK_BIN)" >&2; exit 1; }
}

# The absolute path of the prepared data a job bench trains on: $1 (--data, may be
# empty), else the config's data.dir ($2, "-" for none) when prepared there, else
# data/python-stdlib, prepared from /usr/lib/python3.11 with $dseek on first use.
prepared_data() {
  local data=$1 cfg_data=$2
  if [[ -z $data ]]; then
    if [[ $cfg_data != - && -f $cfg_data/index.capnp ]]; then data=$cfg_data; else data=data/python-stdlib; fi
  fi
  if [[ ! -f $data/index.capnp ]]; then
    [[ $data == data/python-stdlib ]] || { echo "no prepared data in $data" >&2; return 1; }
    echo "preparing $data from /usr/lib/python3.11 ..." >&2
    rm -rf "$data"
    "$dseek" data prepare --input /usr/lib/python3.11 --output "$data" >&2
  fi
  (cd "$data" && pwd)
}

# The start of a benchmark on the namespace test bed (scripts/hosts/testbed.sh): needs
# root (exit 77 otherwise, as a skipped test), checks the machine can make one, and sets
# `testbed` (the script), `bed` (a test bed id: TAG and this shell's pid) and `work` (a
# fresh scratch folder /tmp/dseek-NAME.XXXXXX). The caller sets its EXIT trap.
# A 2-host dseek-node job on the test bed of start_hosts_bench ($testbed, $bed, the hosts'
# $addresses, the data in $work/text): node K as host K, the control plane in plaintext
# (it carries no tensors), SETTINGS (--set ...) after the common ones, each node's output
# in DIR.nodeK.log; exits with the logs' tails when a node fails.
run_hosts_job() {  # run_hosts_job DIR PORT SETTINGS...
  local dir=$1 port=$2 k pid failed=0 pids=()
  shift 2
  for k in 0 1; do
    DSEEK_CLUSTER_SECRET=bench-secret "$testbed" exec "$bed" "$k" build/bin/dseek-node \
      --config config/single.toml --run-dir "$dir" --node-id "$k" \
      --coordinator "${addresses[0]}:$port" --set cluster.nodes=2 \
      --set cluster.advertise_host="\"${addresses[$k]}\"" --set cluster.plaintext=true \
      --set data.dir="\"$work/text\"" --set checkpoint.every_steps=0 "$@" > "$dir.node$k.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [[ $failed != 0 ]]; then echo "a node failed; see $dir.node*.log:" >&2; tail -5 "$dir".node*.log >&2; exit 1; fi
}

start_hosts_bench() {  # start_hosts_bench TAG NAME
  [[ $(id -u) == 0 ]] || { echo "needs root (the test bed makes network namespaces)" >&2; exit 77; }
  testbed=scripts/hosts/testbed.sh
  "$testbed" check
  bed="$1$(( $$ % 10000 ))"
  work=$(mktemp -d "/tmp/dseek-$2.XXXXXX")
}
