#!/usr/bin/env bash
# Reproduces the open- and closed-loop figures of docs/runtime.md ("Open
# loop"): the compare deployment (examples/cluster-compare.toml: 2pl-paxos,
# one shard of three replicas, one front-end, local processes), three-key
# read-modify-write transactions (examples/bench-rmw.toml), 5 s runs.
# Open loop: 8 clients at 125/250/500/1000 txn/s each (1,000 to 8,000 txn/s
# offered), and 625 each (5,000 offered) with the WAN; closed loop: 1 to 16
# clients with no think time, and with the WAN enough clients for the same
# throughputs. Each mode runs without, then with the tiga-gcp WAN emulated
# at full scale.
#
#   scripts/bench-open-loop.sh [nowan|wan|all]
set -euo pipefail
source "$(dirname "$0")/compare-cluster.sh"

# cluster WAN: the compare cluster, with the WAN emulated or not.
cluster() {
  compare_cluster_up "$1"
  # A first short run warms the cluster up (leader, connections).
  run closed 4 0 warm-up >/dev/null
}

# run MODE CLIENTS RATE LABEL: one 5 s bench; prints a table row.
run() {
  local f="$work/exp.toml"
  sed -e "s/^per_region = .*/per_region = $2/" -e 's/^duration_s = .*/duration_s = 5.0/' \
    -e 's/^warmup_s = .*/warmup_s = 1.0/' examples/bench-rmw.toml >"$f"
  if [ "$1" = open ]; then
    sed -i -e 's/^mode = .*/mode = "open"/' -e "s/^think_ms = .*/rate_tps = $3\nmax_outstanding = 2000/" "$f"
  fi
  "$M" bench --cluster "$work/cluster.toml" --config "$f" --report "$work/r.json" >/dev/null
  python3 - "$work/r.json" "$4" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l, b = r["latency_ms"], r.get("bench", {})
lag = (b.get("schedule_lag_ms") or {}).get("p99")
offered = r.get("offered_tps")
print(f"{sys.argv[2]:<22} {offered or '-':>8} {r['throughput_tps']:>9.0f} {l['p50']:>8.1f} {l['p90']:>8.1f} {l['p99']:>8.1f}"
      f" {lag if lag is not None else '-':>8} {b.get('cpu_pct', 0):>6.1f}")
PY
}

header() {
  echo "== $1"
  printf '%-22s %8s %9s %8s %8s %8s %8s %6s\n' run offered achieved p50 p90 p99 lag_p99 cpu%
}

nowan() {
  cluster false
  header "no WAN emulation"
  for c in 1 2 4 8 16; do run closed $c 0 "closed, $c clients"; done
  for r in 125 250 500 1000; do run open 8 $r "open, 8 x $r txn/s"; done
  "$M" cluster down --config "$work/cluster.toml" >/dev/null
}

wan() {
  cluster true
  header "tiga-gcp WAN emulated (floor: one 114.2 ms round trip + fsyncs)"
  for c in 115 230 460; do run closed $c 0 "closed, $c clients"; done
  for r in 125 250 500 625 1000; do run open 8 $r "open, 8 x $r txn/s"; done
  "$M" cluster down --config "$work/cluster.toml" >/dev/null
}

case "${1:-all}" in
  nowan) nowan ;;
  wan) wan ;;
  all) nowan; echo; wan ;;
  *) echo "usage: $0 [nowan|wan|all]" >&2; exit 2 ;;
esac
