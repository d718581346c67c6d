#!/usr/bin/env bash
# A server's memory under sustained load (docs/flat-cost.md): the compare
# deployment (examples/cluster-compare.toml, three replicas and a front-end
# as local processes, no WAN emulation) under examples/bench-rmw.toml's
# read-modify-writes over 10^5 keys, open loop at 1,000 txn/s, as one bench
# of MINUTES minutes (its history checked at the end). Every minute: the
# resident memory of every server process and, on stderr, every node's
# meridian_state_entries gauges (the entries each per-transaction structure
# holds).
#
#   scripts/soak.sh [2pl-paxos|tiga] [MINUTES]
#
# One bench, not one per minute: every bench writes a fresh key range (so
# its history is checked against known initial values), so back-to-back
# benches would grow the data by a key range each.
set -euo pipefail
source "$(dirname "$0")/compare-cluster.sh"
protocol=${1:-2pl-paxos}
minutes=${2:-8}
sed -e 's/^per_region = .*/per_region = 8/' -e "s/^duration_s = .*/duration_s = $((minutes * 60)).0/" \
  -e 's/^warmup_s = .*/warmup_s = 1.0/' -e 's/^mode = .*/mode = "open"/' \
  -e 's/^think_ms = .*/rate_tps = 125\nmax_outstanding = 2000/' examples/bench-rmw.toml >"$work/exp.toml"
compare_cluster_up false "$protocol"
rss_mb() { # the resident memory of each server process of this cluster, MB
  for pid in $(pgrep -f "server --config $work/cluster.toml"); do
    awk '/VmRSS/ {printf "%.0f ", $2 / 1024}' "/proc/$pid/status"
  done
}
state_entries() { # each node's per-transaction structures, on stderr
  local port
  for port in $(seq 7503 4 7531); do # up to eight nodes from base_port 7500
    curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null | awk -v port="$port" \
      '/^meridian_state_entries/ {sub(/.*structure="/, ""); sub(/"}/, ""); s = s $1 "=" $2 " "}
       END {if (s != "") print "  metrics :" port ": " s}' >&2 || true
  done
}
"$M" bench --cluster "$work/cluster.toml" --config "$work/exp.toml" --report "$work/r.json" >"$work/bench.out" &
bench=$!
echo "minute  rss_mb_per_process"
for ((i = 1; i <= minutes; i++)); do
  sleep 60
  printf '%6d  %s\n' "$i" "$(rss_mb)"
  state_entries
done
wait "$bench"
python3 - "$work/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"committed {r['throughput_tps']:.0f} txn/s, history valid: {r['check']['valid']}")
PY
