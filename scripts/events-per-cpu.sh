#!/usr/bin/env bash
# Events per CPU-second of several builds of `meridian`, measured alike
# (docs/flat-cost.md): runs examples/tiga-gcp.toml (4,000 txn/s offered, no
# history check) with each build in turn, ROUNDS times over, and prints for
# each build the user and system seconds of its runs and the median and best
# events per CPU-second (user + system). On a shared machine whose speed
# moves from one minute to the next, only builds alternated in one sitting
# compare. Each build's runs must agree on the trace hash (the simulator is
# deterministic), or the script stops; builds whose protocol behaves
# differently run different events, and then the median CPU seconds of the
# same simulated run compare as well. PROTOCOL (default tiga), DURATION
# (simulated seconds, default 30; a tenth of it, at most 5, warms up),
# KEYS_PER_SHARD (default 10^6) and ROUNDS (default 3) set the run.
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
for i, b in enumerate(bins):
    if len({(r[1], r[2]) for r in runs if int(r[0]) == i}) != 1:
        sys.exit(f"events-per-cpu.sh: {b} ran different events in different rounds: the simulator is not deterministic")
if len({(r[1], r[2]) for r in runs}) != 1:
    print("the builds ran different events (one changes what the protocol does): compare the CPU seconds per run too")
print(f"{'build':<40} {'events':>10} {'trace':>16} {'user s':>22} {'system s':>22} {'CPU s':>6} {'median':>8} {'best':>8} {'peak MB':>8}")
for i, b in enumerate(bins):
    mine = [r for r in runs if int(r[0]) == i]
    events, trace = int(mine[0][1]), mine[0][2]
    user = [float(r[3]) for r in mine]
    system = [float(r[4]) for r in mine]
    cpu = [u + s for u, s in zip(user, system)]
    fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)
    print(f"{b[-40:]:<40} {events:>10,} {trace:>16} {fmt(user):>22} {fmt(system):>22} {statistics.median(cpu):>6.2f} "
          f"{events / statistics.median(cpu) / 1e6:>7.2f}M {events / min(cpu) / 1e6:>7.2f}M {max(int(r[5]) for r in mine) / 1024:>8.0f}")
PY
