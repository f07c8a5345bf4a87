#!/usr/bin/env bash
# The NCCL data plane against UCX on one GPU (issues 3 and 7): the same one-node dseek-node
# job (config/single.toml's model, train.device = "cuda", a few steps) once with
# comm.backend = "ucx" and once with comm.backend = "nccl", and their step losses
# compared. With nccl the node trains over the data plane even alone: its gradients stay
# on the GPU and are all-reduced by a one-rank NCCL communicator whose unique id went
# through the coordinator's rendezvous (actors/control/data_plane_link.hpp); the small
# collectives run through GPU scratch. With ucx a one-node job trains without a data
# plane. World size 1 because the lent machine has ONE GPU and NCCL refuses two ranks on
# one device ("Duplicate GPU"); several GPUs or nodes would run the same code with more ranks.
#
#   bench/gpu/nccl_parity.sh [--steps 8] [--text DIR] [--bound 1e-3]
#
# Bound: the all-reduce of one rank and the sums over one rank change no bits, but with
# nccl AdamW runs on the GPU (the trainer's optimizer) while with ucx dseek-node offloads
# it to the CPU (gradient_shard actors): the same fp32 update, rounded differently, and
# kernels that add with atomics may differ run to run. 1e-3 relative over 8 steps leaves
# that room and still catches a lost or doubled gradient (which moves the loss by far
# more). The
# last line is a JSON summary: {"status":"ok"|"failed", "max_relative_difference", ...}.
# Exit 0 when both runs finished and agree within the bound, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.."

steps=8 text=/usr/lib/python3.11 bound=1e-3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    --bound) bound=$2; shift 2 ;;
    -h|--help) sed -n 2,20p "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bin_dir=${DSEEK_BIN_DIR:-build/bin}
for b in dseek dseek-node; do
  [[ -x $bin_dir/$b ]] || { echo "$bin_dir/$b not found (set DSEEK_BIN_DIR)" >&2; exit 1; }
done
py=/usr/bin/python3
[[ -x $py ]] || py=python3

scratch=$(mktemp -d /tmp/dseek-nccl-parity.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
fail() {
  printf '{"status":"failed","reason":"%s"}\n' "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<<"$1" | tr -d '\n')"
  exit 1
}
"$bin_dir/dseek" data prepare --input "$text" --output "$scratch/data" --max-bytes 3000000 \
  >"$scratch/prepare.log" 2>&1 || fail "dseek data prepare: $(tail -n 1 "$scratch/prepare.log")"

for backend in ucx nccl; do
  run=$scratch/$backend
  if ! "$bin_dir/dseek-node" --config config/single.toml --run-dir "$run" \
      --set "data.dir=\"$scratch/data\"" --set "train.steps=$steps" --set "train.eval_every=0" \
      --set 'train.device="cuda"' --set "comm.backend=\"$backend\"" \
      --set 'metrics.progress="plain"' >"$run.log" 2>&1; then
    echo "--- comm.backend = $backend: dseek-node failed:" >&2
    tail -n 20 "$run.log" >&2
    fail "comm.backend = $backend: dseek-node failed: $(grep -iE 'error|fail' "$run.log" | tail -n 1)"
  fi
done

"$py" - "$scratch" "$steps" "$bound" <<'PY'
import glob, json, sys
scratch, steps, bound = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def losses(backend):
    out = {}
    for path in glob.glob(f"{scratch}/{backend}/**/events.jsonl", recursive=True):
        for line in open(path):
            e = json.loads(line)
            if e.get("event") == "step":
                out[e["step"]] = e["loss"]
    return [out[k] for k in sorted(out)]
ucx, nccl = losses("ucx"), losses("nccl")
summary = {"world_size": 1, "steps": steps, "bound": bound,
           "ucx_losses": ucx, "nccl_losses": nccl}
if len(ucx) != steps or len(nccl) != steps:
    summary.update(status="failed", reason=f"step events: ucx {len(ucx)}, nccl {len(nccl)}, expected {steps}")
else:
    worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(nccl, ucx))
    summary.update(max_relative_difference=worst,
                   status="ok" if worst <= bound else "failed",
                   first_loss=nccl[0], last_loss=nccl[-1])
    print(f"comm.backend nccl vs ucx, 1 GPU, world size 1, {steps} steps: losses "
          f"{nccl[0]:.4f} -> {nccl[-1]:.4f}, max relative difference {worst:.2e} (bound {bound:g})")
print(json.dumps(summary, separators=(",", ":")))  # check.sh reads it with json_field
sys.exit(0 if summary["status"] == "ok" else 1)
PY
