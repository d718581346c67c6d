#!/usr/bin/env bash
# Reproduces the simulated figures of docs/tiga.md: every run is
# examples/tiga-gcp.toml shortened to 10 s, run by `tiga` (or `2pl-paxos` for
# comparison) with what is named changed, and prints meridian's summary.
#
#   scripts/tiga-figures.sh [all|fast|spread|delta|clock|skew|failover]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
M=target/release/meridian
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# variant NAME SED-SCRIPT [EXTRA-TOML]: a copy of the example, edited.
variant() {
  local file="$work/$1.toml"
  sed -e 's/^duration_s = .*/duration_s = 10.0/' -e 's/^name = .*/name = "tiga"/' -e "$2" examples/tiga-gcp.toml >"$file"
  if [ -n "${3:-}" ]; then printf '\n%s\n' "$3" >>"$file"; fi
  echo "$file"
}

run() { # run LABEL PROTOCOL FILE (the file's [protocol.params] are tiga's)
  echo "== $1"
  "$M" sim --config "$3" --protocol "$2" | grep -v '^commit rate'
  echo
}

fast() {
  local f
  f=$(variant colocated '')
  run "colocated leaders, delta 10 ms" tiga "$f"
  run "colocated leaders (2pl-paxos)" 2pl-paxos "$f"
}

spread() {
  run "leaders spread (detective mode)" tiga "$(variant spread 's/^leaders = .*/leaders = "spread"/')"
}

delta() { # Figure 13: theta 0.99, leaders spread, 400 txn/s offered
  for d in -50 -20 0 20 50; do
    local f
    f=$(variant "delta$d" 's/^leaders = .*/leaders = "spread"/; s/^zipf = .*/zipf = 0.99/; s/^rate_tps = .*/rate_tps = 50/' \
      "[protocol.params]
headroom_delta_ms = $d")
    run "theta 0.99, leaders spread, 400 txn/s, delta $d ms" tiga "$f"
  done
}

clock() { # Table 3's clock errors
  for sd in 0 5 16 60; do
    run "clock offset stddev $sd ms" tiga "$(variant "clock$sd" "s/^offset_ms_stddev = .*/offset_ms_stddev = $sd.0/")"
  done
}

skew() { # Figure 12: contention, co-located vs spread leaders, 800 txn/s offered
  for z in 0.5 0.9 0.99; do
    for l in colocated spread; do
      run "theta $z, $l leaders, 800 txn/s" tiga \
        "$(variant "skew$z$l" "s/^zipf = .*/zipf = $z/; s/^leaders = .*/leaders = \"$l\"/; s/^rate_tps = .*/rate_tps = 100/")"
    done
  done
}

failover() { # §5.4: shard 0's leader killed at 5 s
  local f
  f=$(variant failover '' '[[faults]]
at_s = 5.0
kind = "crash"
node = "shard0-replica0"')
  "$M" sim --config "$f" --protocol tiga --report "$work/failover.json" >/dev/null
  echo "== shard 0's leader crashed at 5 s: commits per second"
  tr -d ' \n' <"$work/failover.json" | grep -o '"committed_per_s":\[[0-9,]*\]'
  tr -d ' \n' <"$work/failover.json" | grep -o '"view_change_completions":[0-9]*'
  tr -d ' \n' <"$work/failover.json" | grep -o '"valid":[a-z]*'
  echo
  echo
}

case "${1:-all}" in
  all) fast; spread; delta; clock; skew; failover ;;
  fast | spread | delta | clock | skew | failover) "$1" ;;
  *) echo "usage: $0 [all|fast|spread|delta|clock|skew|failover]" >&2; exit 2 ;;
esac
