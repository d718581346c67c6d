#!/usr/bin/env bash
# Measures what the simulator's CPU model is calibrated against
# (docs/cost-model.md): CPU time per committed transaction of a real
# cluster's processes (the compare deployment, examples/cluster-compare.toml:
# one shard of three replicas and one front-end as local processes, no WAN
# emulation) under examples/bench-rmw.toml's three-key read-modify-writes,
# open loop at 2,000 txn/s for 10 s; then the same workload and rate in the
# simulator, with a LAN-like latency matrix and the default [cpu] model.
# `meridian bench` reports the cluster processes' own CPU time (from
# /proc) under `cpu`, `meridian sim` the simulated CPU time.
#
# With `sizes` first, it runs the value-size sweep instead: write-only
# ramp-ycsb transactions of four keys, 8 clients x 125 txn/s, with 16- and
# 4,096-byte values (what the per-byte cost is fitted to).
#
#   scripts/calibrate-cpu.sh [sizes] [2pl-paxos|tiga ...]
set -euo pipefail
source "$(dirname "$0")/compare-cluster.sh"
sizes=false
if [ "${1:-}" = sizes ]; then sizes=true; shift; fi
protocols=("$@")
[ $# -eq 0 ] && protocols=(2pl-paxos tiga)

experiment() { # PROTOCOL [VALUE_BYTES]
  if [ -n "${2:-}" ]; then
    # The value-size sweep: write-only transactions of four keys.
    cat <<EOT
[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina", "finland", "brazil"]
shards = 1
replicas_per_shard = 3

[clients]
regions = ["south-carolina"]
per_region = 8
mode = "open"
rate_tps = 125
max_outstanding = 2000

[workload]
kind = "ramp-ycsb"
keys = 100000
txn_size = 4
read_txn_pct = 0.0
value_bytes = $2

[run]
duration_s = 10.0
warmup_s = 1.0
drain_s = 5.0
seed = 1

[protocol]
name = "$1"
EOT
    return
  fi
  # bench-rmw.toml, open loop, 8 clients x 250 txn/s, 10 s.
  sed -e 's/^per_region = .*/per_region = 8/' -e 's/^duration_s = .*/duration_s = 10.0/' \
    -e 's/^warmup_s = .*/warmup_s = 1.0/' -e 's/^mode = .*/mode = "open"/' \
    -e 's/^think_ms = .*/rate_tps = 250\nmax_outstanding = 2000/' -e "s/^name = \"2pl-paxos\"/name = \"$1\"/" \
    examples/bench-rmw.toml
}

cpu_row() { # LABEL REPORT
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
c = r["cpu"]
roles = ", ".join(f"{k} {v:.0f} ms" for k, v in sorted(c["busy_ms_by_role"].items()))
print(f"{sys.argv[1]:<20} {r['throughput_tps']:>8.0f} txn/s {c['us_per_committed_txn']:>8.1f} µs/txn  ({roles})")
PY
}

for p in "${protocols[@]}"; do
 for vb in $($sizes && echo "16 4096" || echo "-"); do
  [ "$vb" = - ] && vb=""
  compare_cluster_up false "$p"
  experiment "$p" $vb >"$work/exp.toml"
  "$M" bench --cluster "$work/cluster.toml" --config "$work/exp.toml" --report "$work/warm.json" >/dev/null
  "$M" bench --cluster "$work/cluster.toml" --config "$work/exp.toml" --report "$work/real.json" >/dev/null
  "$M" cluster down --config "$work/cluster.toml" >/dev/null
  cpu_row "$p ${vb:+$vb B }real" "$work/real.json"
  # The simulator: the same experiment on a LAN-like matrix.
  sed -e 's/^preset = .*//' "$work/exp.toml" >"$work/sim.toml"
  printf '\n[network]\nrtt_ms = { "south-carolina-finland" = 0.1, "south-carolina-brazil" = 0.1, "finland-brazil" = 0.1 }\nlocal_rtt_ms = 0.1\n' >>"$work/sim.toml"
  "$M" sim --config "$work/sim.toml" --no-check --report "$work/sim.json" >/dev/null
  cpu_row "$p ${vb:+$vb B }simulated" "$work/sim.json"
 done
done
