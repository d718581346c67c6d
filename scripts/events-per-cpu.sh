#!/usr/bin/env bash
# Events per CPU-second of several builds of `meridian`, measured alike
# (docs/flat-cost.md): runs examples/tiga-gcp.toml (4,000 txn/s offered, no
# history check) with each build in turn, ROUNDS times over, and prints for
# each build the user and system seconds of its runs and the median and best
# events per CPU-second (user + system). On a shared machine whose speed
# moves from one minute to the next, only builds alternated in one sitting
# compare; the runs must also agree on the trace hash (same events), or the
# script stops. PROTOCOL (default tiga), DURATION (simulated seconds, default
# 30; a tenth of it, at most 5, warms up), KEYS_PER_SHARD (default 10^6) and
# ROUNDS (default 3) set the run.
#
#   scripts/events-per-cpu.sh BIN [BIN ...]
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/events-per-cpu.sh BIN [BIN ...]" >&2; exit 2; }
bins=()
for b in "$@"; do
  [ -f "$b" ] && [ -x "$b" ] || { echo "events-per-cpu.sh: $b is not an executable" >&2; exit 2; }
  bins+=("$(realpath "$b")")
done
set -- "${bins[@]}"
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
protocol=${PROTOCOL:-tiga}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
duration=${DURATION:-30}
scripts/tiga-gcp-at.sh "$duration.0" "${KEYS_PER_SHARD:-1000000}" >"$work/exp.toml"
for ((r = 0; r < rounds; r++)); do
  i=0
  for b in "$@"; do
    /usr/bin/time -f '%U %S %M' -o "$work/time" "$b" sim --config "$work/exp.toml" --protocol "$protocol" \
      --no-check --report "$work/r.json" >/dev/null
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["events"], r["trace_hash"])' \
      "$work/r.json" >"$work/events"
    echo "$i $(cat "$work/events") $(cat "$work/time")" >>"$work/runs"
    i=$((i + 1))
  done
done
python3 - "$work/runs" "$@" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
bins = sys.argv[2:]
if len({(r[1], r[2]) for r in runs}) != 1:
    sys.exit("events-per-cpu.sh: the builds ran different events: " + ", ".join(sorted({r[1] + " " + r[2] for r in runs})))
events = int(runs[0][1])
print(f"{events:,} events, trace {runs[0][2]}")
print(f"{'build':<40} {'user s':>22} {'system s':>22} {'median':>8} {'best':>8} {'peak MB':>8}")
for i, b in enumerate(bins):
    mine = [r for r in runs if int(r[0]) == i]
    user = [float(r[3]) for r in mine]
    system = [float(r[4]) for r in mine]
    cpu = [u + s for u, s in zip(user, system)]
    fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)
    print(f"{b[-40:]:<40} {fmt(user):>22} {fmt(system):>22} {events / statistics.median(cpu) / 1e6:>7.2f}M "
          f"{events / min(cpu) / 1e6:>7.2f}M {max(int(r[5]) for r in mine) / 1024:>8.0f}")
PY
