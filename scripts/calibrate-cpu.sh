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
# With `keys` first, it runs the transaction-size sweep of NOC-NOC's
# Figure 6: ramp-ycsb transactions of 4, 32 and 128 keys, 95 % read-only,
# 1-byte values, 8 clients x 50 txn/s (RAMP-F's 128-key transactions
# saturate the real cluster's one partition at 1,000 txn/s); what the
# per-key and per-field costs are fitted to. The protocols default to ra-noc2 and ramp-f.
#
#   scripts/calibrate-cpu.sh [sizes|keys] [PROTOCOL ...]
set -euo pipefail
source "$(dirname "$0")/compare-cluster.sh"
mode=rmw
case "${1:-}" in sizes | keys) mode=$1; shift ;; esac
protocols=("$@")
if [ $# -eq 0 ]; then
  [ "$mode" = keys ] && protocols=(ra-noc2 ramp-f) || protocols=(2pl-paxos tiga)
fi

experiment() { # PROTOCOL [SIZE]
  if [ -n "${2:-}" ]; then
    # The value-size sweep (write-only transactions of four keys) or the
    # transaction-size sweep (95 % read-only, 1-byte values).
    local txn_size=4 read_pct=0.0 value_bytes=$2 rate=125
    if [ "$mode" = keys ]; then txn_size=$2 read_pct=95.0 value_bytes=1 rate=50; fi
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
rate_tps = $rate
max_outstanding = 2000

[workload]
kind = "ramp-ycsb"
keys = 100000
txn_size = $txn_size
read_txn_pct = $read_pct
value_bytes = $value_bytes

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
 for vb in $(case $mode in sizes) echo "16 4096" ;; keys) echo "4 32 128" ;; *) echo - ;; esac); do
  [ "$vb" = - ] && vb=""
  compare_cluster_up false "$p"
  experiment "$p" $vb >"$work/exp.toml"
  "$M" bench --cluster "$work/cluster.toml" --config "$work/exp.toml" --report "$work/warm.json" >/dev/null
  "$M" bench --cluster "$work/cluster.toml" --config "$work/exp.toml" --report "$work/real.json" >/dev/null
  "$M" cluster down --config "$work/cluster.toml" >/dev/null
  unit=B; [ "$mode" = keys ] && unit=keys
  cpu_row "$p ${vb:+$vb $unit }real" "$work/real.json"
  # The simulator: the same experiment on a LAN-like matrix.
  sed -e 's/^preset = .*//' "$work/exp.toml" >"$work/sim.toml"
  printf '\n[network]\nrtt_ms = { "south-carolina-finland" = 0.1, "south-carolina-brazil" = 0.1, "finland-brazil" = 0.1 }\nlocal_rtt_ms = 0.1\n' >>"$work/sim.toml"
  "$M" sim --config "$work/sim.toml" --no-check --report "$work/sim.json" >/dev/null
  cpu_row "$p ${vb:+$vb $unit }simulated" "$work/sim.json"
  if [ "$mode" = keys ]; then
    # The per-key and per-field costs fitted to this sweep (docs/cost-model.md).
    printf '\n[cpu]\nserver_ns_per_key = 1200.0\nclient_ns_per_key = 1100.0\n' >>"$work/sim.toml"
    "$M" sim --config "$work/sim.toml" --no-check --report "$work/sim.json" >/dev/null
    cpu_row "$p $vb $unit per key" "$work/sim.json"
    printf 'server_ns_per_field = 20.0\nclient_ns_per_field = 60.0\n' >>"$work/sim.toml"
    "$M" sim --config "$work/sim.toml" --no-check --report "$work/sim.json" >/dev/null
    cpu_row "$p $vb $unit per key+field" "$work/sim.json"
  fi
 done
done
