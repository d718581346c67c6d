#!/usr/bin/env bash
# A server's memory under sustained load (docs/flat-cost.md): the compare
# deployment (examples/cluster-compare.toml, three replicas and a front-end
# as local processes, no WAN emulation) under examples/bench-rmw.toml's
# read-modify-writes, open loop at 1,000 txn/s, as ROUNDS back-to-back
# benches of 60 s each against the same cluster (each one's history
# checked); after each, the resident memory of every server process.
#
#   scripts/soak.sh [2pl-paxos|tiga] [ROUNDS]
set -euo pipefail
source "$(dirname "$0")/compare-cluster.sh"
protocol=${1:-2pl-paxos}
rounds=${2:-8}
sed -e 's/^per_region = .*/per_region = 8/' -e 's/^duration_s = .*/duration_s = 60.0/' \
  -e 's/^warmup_s = .*/warmup_s = 1.0/' -e 's/^mode = .*/mode = "open"/' \
  -e 's/^think_ms = .*/rate_tps = 125\nmax_outstanding = 2000/' examples/bench-rmw.toml >"$work/exp.toml"
compare_cluster_up false "$protocol"
rss_mb() { # the resident memory of each server process of this cluster, MB
  for pid in $(pgrep -f "server --config $work/cluster.toml"); do
    awk '/VmRSS/ {printf "%.0f ", $2 / 1024}' "/proc/$pid/status"
  done
}
echo "round  minutes  committed_tps  check  rss_mb_per_process"
for i in $(seq 1 "$rounds"); do
  "$M" bench --cluster "$work/cluster.toml" --config "$work/exp.toml" --report "$work/r.json" >/dev/null
  python3 - "$work/r.json" "$i" "$(rss_mb)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:>5}  {int(sys.argv[2]):>7}  {r['throughput_tps']:>13.0f}  {str(r['check']['valid']):>5}  {sys.argv[3]}")
PY
done
