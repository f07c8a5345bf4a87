#!/usr/bin/env bash
# One task of an srun step: runs dseek-node with this script's arguments, and runs it
# again when it dies (killed, crashed, OOM), so that the node rejoins its running job
# (dseek's elastic rejoin) while the other tasks go on. Slurm restarts no single task of
# a step; this loop is what `dseek launch` does for local nodes.
#
#   srun deploy/slurm/restart-node.sh --config job.toml [dseek-node arguments ...]
#
#   DSEEK_NODE_BINARY    the node program (default: dseek-node next to this repository's
#                        build/bin, else dseek-node on PATH)
#   DSEEK_MAX_RESTARTS   restarts of this task before it gives up (default 3)
#
# Each restart runs with DSEEK_RESTART_COUNT = its number (1, 2, ...): dseek-node then
# knows it is a new incarnation that joins a running job, not a fresh start. Exit 0 ends
# the loop (the job finished), so do 130 / 143 (a signal stopped the node orderly); SIGTERM or SIGINT to this script
# (scancel, the time limit) goes on to the node and ends the loop too. Exit 2 (a bad
# command line) and 3 (a config, data, device or checkpoint error) end it at once: they
# fail the same way on every start (runtime/util/exit_codes.hpp).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
node=${DSEEK_NODE_BINARY:-}
if [ -z "$node" ]; then
  node="$here/../../build/bin/dseek-node"
  [ -x "$node" ] || node=dseek-node
fi
max=${DSEEK_MAX_RESTARTS:-3}
restarts=${DSEEK_RESTART_COUNT:-0}
task=${SLURM_PROCID:-?}
child=
stopping=0
trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT

while true; do
  DSEEK_RESTART_COUNT=$restarts "$node" "$@" &
  child=$!
  status=0
  wait "$child" || status=$?
  # A trapped signal ends `wait` early: wait on until the node itself has exited.
  while kill -0 "$child" 2>/dev/null; do
    status=0
    wait "$child" || status=$?
  done
  child=
  [ "$status" -eq 0 ] && exit 0
  if [ "$stopping" -eq 1 ]; then exit "$status"; fi
  # 130 / 143: a signal stopped it orderly (scancel, the time limit): not a failure.
  if [ "$status" -eq 130 ] || [ "$status" -eq 143 ]; then exit "$status"; fi
  if [ "$status" -eq 2 ] || [ "$status" -eq 3 ]; then
    echo "restart-node: task $task: dseek-node exited with status $status (a permanent error); not restarting" >&2
    exit "$status"
  fi
  if [ "$status" -eq 4 ]; then
    echo "restart-node: task $task: dseek-node was evicted by the SDC audit (status 4); not restarting" >&2
    exit "$status"
  fi
  if [ "$restarts" -ge "$max" ]; then
    echo "restart-node: task $task: dseek-node exited with status $status; gave up after $max restart(s)" >&2
    exit "$status"
  fi
  restarts=$((restarts + 1))
  echo "restart-node: task $task: dseek-node exited with status $status; restarting ($restarts/$max)" >&2
  sleep 1
done
