#!/usr/bin/env bash
# Instructions per simulated event (docs/flat-cost.md): runs
# examples/tiga-gcp.toml for 4 simulated seconds (0.5 s warm-up, no
# history check) under callgrind and prints the instructions the whole
# process executed, the events the run handled and their ratio. Unlike
# events per second this does not depend on how fast or how busy the
# machine is: the same binary and inputs give the same count, so two
# builds compare exactly. KEYS_PER_SHARD (default 10^6) sets the key space;
# BIN compares another build of `meridian` (default target/release).
# CACHE=1 also simulates the caches (callgrind's --cache-sim, about three times as
# slow) and prints first-level instruction and data cache misses per event.
#
#   scripts/instructions.sh [2pl-paxos|tiga ...]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 2; }
bin=${BIN:-target/release/meridian}
[ -n "${BIN:-}" ] || cargo build --release -q
protocols=("$@")
[ ${#protocols[@]} -eq 0 ] && protocols=(2pl-paxos tiga)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scripts/tiga-gcp-at.sh 4.0 "${KEYS_PER_SHARD:-1000000}" 0.5 >"$work/exp.toml"
cache=(--cache-sim=no)
[ "${CACHE:-0}" = 1 ] && cache=(--cache-sim=yes)
printf '%-10s %16s %10s %16s %14s' protocol instructions events per_event trace_hash
[ "${CACHE:-0}" = 1 ] && printf ' %14s %14s' I1_miss_per_ev D1_miss_per_ev
printf '\n'
for p in "${protocols[@]}"; do
  if ! valgrind --tool=callgrind "${cache[@]}" --error-exitcode=0 --callgrind-out-file="$work/cg" "$bin" sim \
    --config "$work/exp.toml" --protocol "$p" --no-check --report "$work/r.json" >/dev/null 2>"$work/err"; then
    grep -v '^==' "$work/err" >&2
    exit 2
  fi
  ir=$(sed -n 's/.*I *refs: *//p' "$work/err" | tr -d ,)
  i1=$(sed -n 's/.*I1 *misses: *//p' "$work/err" | tr -d ,)
  d1=$(sed -n 's/.*D1 *misses: *\([0-9,]*\).*/\1/p' "$work/err" | tr -d ,)
  python3 - "$work/r.json" "$ir" "$p" "${i1:-}" "${d1:-}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ir, ev = int(sys.argv[2]), r['events']
line = f"{sys.argv[3]:<10} {ir:>16,} {ev:>10,} {ir / ev:>16,.0f} {r['trace_hash']:>14}"
if sys.argv[4] and sys.argv[5]:
    line += f" {int(sys.argv[4]) / ev:>14.1f} {int(sys.argv[5]) / ev:>14.1f}"
print(line)
PY
done
