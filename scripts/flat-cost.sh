#!/usr/bin/env bash
# Cost as a run grows (docs/flat-cost.md): runs examples/tiga-gcp.toml
# (4,000 txn/s offered, no history) for 30, 60 and 120 simulated seconds
# with each protocol and prints simulated events per wall-clock second and
# the process's peak memory (max RSS). KEYS_PER_SHARD=1000 shrinks the key
# space so the data stops growing and what remains is per-transaction state.
# BIN measures another build of `meridian` (scripts/build-pgo.sh's, say).
#
#   scripts/flat-cost.sh [2pl-paxos|tiga ...] [-- DURATIONS...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-target/release/meridian}
[ -n "${BIN:-}" ] || cargo build --release -q
protocols=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do protocols+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
durations=("$@")
[ ${#protocols[@]} -eq 0 ] && protocols=(2pl-paxos tiga)
[ ${#durations[@]} -eq 0 ] && durations=(30 60 120)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-10s %6s %12s %10s %14s %10s\n' protocol sim_s events wall_s events_per_s peak_MB
for p in "${protocols[@]}"; do
  for d in "${durations[@]}"; do
    scripts/tiga-gcp-at.sh "$d.0" "${KEYS_PER_SHARD:-1000000}" >"$work/exp.toml"
    /usr/bin/time -f '%M' -o "$work/rss" "$bin" sim --config "$work/exp.toml" \
      --protocol "$p" --no-check --report "$work/r.json" >/dev/null
    python3 - "$work/r.json" "$(cat "$work/rss")" "$p" "$d" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[3]:<10} {sys.argv[4]:>6} {r['events']:>12} {r['wall_s']:>10.1f} {r['events']/r['wall_s']/1e6:>12.2f} M {int(sys.argv[2])/1024:>10.0f}")
PY
  done
done
