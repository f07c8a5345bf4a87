#!/usr/bin/env bash
# A multi-host test bed on one machine (root only): each "host" is a network namespace
# with its own address on a private bridge (veth pairs), run under its own UTS, mount,
# IPC and PID namespaces (own hostname, /dev/shm, SysV IPC, pids), so nothing of one
# host's shared memory is visible to another and UCX has to go over TCP between hosts. Used by the `hosts` ctest
# label (tests/hosts/) and by benchmarks. Every subcommand acts only on what `up` made.
#
#   scripts/hosts/testbed.sh check             exit 0 if a test bed can be made here
#   scripts/hosts/testbed.sh up ID N           N hosts; prints "h<K> <address>" per host
#   scripts/hosts/testbed.sh exec ID K CMD...  runs CMD as host K
#   scripts/hosts/testbed.sh cut ID K          takes host K's link down
#   scripts/hosts/testbed.sh heal ID K         brings it back
#   scripts/hosts/testbed.sh rate ID K RATE    limits host K's egress (tc tbf, e.g. 100mbit)
#   scripts/hosts/testbed.sh cpu ID K PERCENT  limits what host K's processes started
#                                              after it compute to PERCENT of one CPU (a cgroup)
#   scripts/hosts/testbed.sh down ID           removes the hosts, links and bridge
#
# ID: a short tag ([a-z0-9], at most 6 characters) naming one test bed; the subnet is a
# private 10.77.X.0/24 not routed on this machine. State: /run/dseek-testbed/ID.
set -euo pipefail

state_root=/run/dseek-testbed
die() { echo "testbed: $*" >&2; exit 1; }
need_id() {
  [[ ${1:-} =~ ^[a-z0-9]{1,6}$ ]] || die "ID must be 1-6 characters of [a-z0-9], got '${1:-}'"
}
ns_of() { echo "dseek-$1-h$2"; }
bridge_of() { echo "dsk$1b"; }
veth_of() { echo "dsk$1v$2"; }  # the root namespace's end of host K's link
load() {
  need_id "$1"
  [[ -f $state_root/$1 ]] || die "no test bed '$1' (scripts/hosts/testbed.sh up $1 N first)"
  # shellcheck disable=SC1090
  source "$state_root/$1"
}
# Host K's cgroup of the cpu controller: cgroup v1 (/sys/fs/cgroup/cpu) or v2.
cgroup_of() {
  if [[ -d /sys/fs/cgroup/cpu && -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
    echo "/sys/fs/cgroup/cpu/dseek-testbed-$1-h$2"
  else
    echo "/sys/fs/cgroup/dseek-testbed-$1-h$2"
  fi
}
need_host() {
  [[ $2 =~ ^[0-9]+$ && $2 -lt $1 ]] || die "host $2 is not one of the test bed's $1 hosts"
}

cmd=${1:-}
shift || true
case "$cmd" in
  check)
    [[ $(id -u) == 0 ]] || die "needs root (ip netns, veth, unshare)"
    command -v ip >/dev/null || die "the ip program (iproute2) is missing"
    command -v unshare >/dev/null || die "the unshare program (util-linux) is missing"
    probe="dseek-probe-$$"
    ip netns add "$probe" 2>/dev/null || die "ip netns add failed: network namespaces unavailable"
    ip netns del "$probe"
    ;;
  up)
    need_id "${1:-}"
    id=$1 hosts=${2:-}
    [[ $hosts =~ ^[0-9]+$ && $hosts -ge 1 && $hosts -le 16 ]] || die "N must be 1..16"
    [[ -f $state_root/$id ]] && die "test bed '$id' exists already (down it first)"
    mkdir -p "$state_root"
    # A /24 that no route on this machine covers.
    subnet=""
    for ((x = 1; x < 255; x++)); do
      candidate="10.77.$(( (RANDOM + x) % 254 + 1 ))"
      if ! ip -4 route show | grep -q "^${candidate//./\\.}\.\|^10\.77\.0\.0/16\|^10\.0\.0\.0/8"; then
        subnet=$candidate
        break
      fi
    done
    [[ -n $subnet ]] || die "no free 10.77.X.0/24 subnet"
    printf 'hosts=%s\nsubnet=%s\n' "$hosts" "$subnet" > "$state_root/$id"
    trap '"$0" down "$id" >/dev/null 2>&1 || true' ERR
    bridge=$(bridge_of "$id")
    ip link add "$bridge" type bridge
    ip link set "$bridge" up
    for ((k = 0; k < hosts; k++)); do
      ns=$(ns_of "$id" "$k") veth=$(veth_of "$id" "$k")
      ip netns add "$ns"
      ip link add "$veth" type veth peer name eth0 netns "$ns"
      ip link set "$veth" master "$bridge" up
      ip -n "$ns" link set lo up
      ip -n "$ns" addr add "$subnet.$((k + 1))/24" dev eth0
      ip -n "$ns" link set eth0 up
      echo "h$k $subnet.$((k + 1))"
    done
    ;;
  exec)
    load "${1:-}"
    id=$1 k=${2:-}
    need_host "$hosts" "$k"
    shift 2
    [[ $# -gt 0 ]] || die "exec: no command"
    # A CPU-limited host (testbed.sh cpu): this process, and so the command, in its cgroup.
    cgroup=$(cgroup_of "$id" "$k")
    [[ -d $cgroup ]] && echo $$ > "$cgroup/cgroup.procs"
    # Own hostname, /dev/shm, System V IPC and process ids (UCX reaches a peer through
    # shared memory or cross-memory attach when those namespaces are shared), then the
    # command; unshare stays its parent (--fork) and takes it along when it dies.
    exec ip netns exec "$(ns_of "$id" "$k")" unshare --uts --mount --ipc --pid --fork \
      --kill-child --mount-proc --propagation private \
      sh -c 'hostname "$0" && mount -t tmpfs -o size=1g tmpfs /dev/shm && exec "$@"' \
      "dseek-$id-h$k" "$@"
    ;;
  cut|heal)
    load "${1:-}"
    need_host "$hosts" "${2:-}"
    ip link set "$(veth_of "$1" "$2")" "$([[ $cmd == cut ]] && echo down || echo up)"
    # After a heal no host keeps a neighbour entry that failed while the link was down
    # (the kernel would answer "unreachable" for it a while longer).
    if [[ $cmd == heal ]]; then
      for ((k = 0; k < hosts; k++)); do ip -n "$(ns_of "$1" "$k")" neigh flush all 2>/dev/null || true; done
    fi
    ;;
  rate)
    load "${1:-}"
    need_host "$hosts" "${2:-}"
    [[ ${3:-} =~ ^[0-9]+[kmg]?bit$ ]] || die "RATE like 100mbit or 1gbit, got '${3:-}'"
    ip -n "$(ns_of "$1" "$2")" link set eth0 up
    tc -n "$(ns_of "$1" "$2")" qdisc replace dev eth0 root tbf rate "$3" burst 256kb latency 50ms
    ;;
  cpu)
    load "${1:-}"
    need_host "$hosts" "${2:-}"
    [[ ${3:-} =~ ^[0-9]+$ && $3 -ge 1 && $3 -le 100 ]] || die "PERCENT must be 1..100, got '${3:-}'"
    cgroup=$(cgroup_of "$1" "$2")
    mkdir -p "$cgroup" || die "cannot make the cgroup $cgroup"
    # A short period (10 ms): a limited process runs in slices finer than a step's ops.
    if [[ -f $cgroup/cpu.cfs_quota_us ]]; then
      echo 10000 > "$cgroup/cpu.cfs_period_us"
      echo $(( $3 * 100 )) > "$cgroup/cpu.cfs_quota_us"
    else
      grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
        echo +cpu > /sys/fs/cgroup/cgroup.subtree_control || die "no cpu controller in cgroup v2"
      echo "$(( $3 * 100 )) 10000" > "$cgroup/cpu.max"
    fi
    ;;
  down)
    need_id "${1:-}"
    id=$1
    hosts=16
    [[ -f $state_root/$id ]] && source "$state_root/$id"
    for ((k = 0; k < hosts; k++)); do
      ns=$(ns_of "$id" "$k")
      if ip netns list | grep -qw "$ns"; then
        # Whatever still runs as that host goes with it.
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns"
      fi
      ip link del "$(veth_of "$id" "$k")" 2>/dev/null || true
      cgroup=$(cgroup_of "$id" "$k")
      [[ -d $cgroup ]] && rmdir "$cgroup" 2>/dev/null || true
    done
    ip link del "$(bridge_of "$id")" 2>/dev/null || true
    rm -f "$state_root/$id"
    ;;
  -h|--help|"") sed -n '2,19p' "$0" ;;
  *) die "unknown subcommand '$cmd' (check, up, exec, cut, heal, rate, cpu, down)" ;;
esac
