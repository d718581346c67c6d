#!/usr/bin/env bash
# Reproduces the Redis gateway's redis-benchmark figures of docs/runtime.md
# ("Redis gateway"): examples/cluster-local.toml (3 shards x 3 replicas and
# a front-end, local processes) running 2pl-paxos or tiga, without WAN
# emulation (20,000 requests per test) and with the tiga-gcp WAN at full
# scale (4,000), each with [security] off and on (a password, mutual TLS
# between peers, clients over TLS: `redis-benchmark --tls --cacert -a`).
# Prints one row per run: throughput (requests/s) and p50 (ms) of SET, GET,
# INCR and MSET (10 keys). The cluster listens on ports 17400 and up, clear
# of a cluster-local.toml that may be running meanwhile.
#
#   scripts/redis-bench.sh [nowan|wan|all]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -q
M=${CARGO_TARGET_DIR:-target}/release/meridian
work=$(mktemp -d)
trap '"$M" cluster down --config "$work/cluster.toml" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
command -v redis-benchmark >/dev/null || { echo "redis-benchmark is missing (apt-get install redis-tools)" >&2; exit 2; }

# up PROTOCOL WAN SECURE: the cluster from empty storage.
up() {
  local wan=false
  [ "$2" = wan ] && wan=true
  sed -e "s/^emulate_wan = .*/emulate_wan = $wan/" -e 's/^wan_scale = .*/wan_scale = 1.0/' \
    -e "s#^data_dir = .*#data_dir = \"$work/data\"#" -e "s/^name = \"2pl-paxos\"/name = \"$1\"/" \
    -e 's/^base_port = 7400/base_port = 17400/' -e 's/127\.0\.0\.1:74/127.0.0.1:174/' \
    examples/cluster-local.toml >"$work/cluster.toml"
  if [ "$1" != 2pl-paxos ]; then
    # The example's parameters and explicit addresses are 2pl-paxos's
    # (Tiga's view managers come before the front-end): every node takes
    # [listen]'s.
    sed -i -e '/^heartbeat_ms/d' -e '/^election_timeout_ms/d' -e '/^\[\[nodes\]\]/,$d' "$work/cluster.toml"
  fi
  if [ "$3" = secure ]; then
    printf '\n[security]\npassword_file = "%s/certs/password"\ntls = true\ncerts_dir = "%s/certs"\n' \
      "$work" "$work" >>"$work/cluster.toml"
    "$M" cluster certs --config "$work/cluster.toml" >/dev/null
  fi
  "$M" cluster down --config "$work/cluster.toml" >/dev/null 2>&1 || true
  rm -rf "$work/data"
  # The front-end's Redis port, from what `up` prints.
  port=$("$M" cluster up --config "$work/cluster.toml" | sed -n 's/^front-end .* redis 127\.0\.0\.1:\([0-9]*\) .*/\1/p')
}

# run PROTOCOL WAN SECURE: one row of the table.
run() {
  up "$@"
  local n=20000 flags=()
  [ "$2" = wan ] && n=4000
  if [ "$3" = secure ]; then
    flags=(--tls --cacert "$work/certs/ca.pem" -a "$(cat "$work/certs/password")")
  fi
  # A few requests first: leaders elected, connections open.
  redis-benchmark -p "$port" "${flags[@]}" -t set -r 100000 -c 10 -n 100 -q >/dev/null 2>&1
  redis-benchmark -p "$port" "${flags[@]}" -t set,get,incr,mset -r 100000 -c 50 -n "$n" --csv 2>/dev/null \
    | python3 -c '
import csv, sys
rows = {r[0]: r for r in csv.reader(sys.stdin) if r and r[0] != "test"}
cells = [f"{float(rows[t][1]):,.0f} / {float(rows[t][4]):.1f}" for t in ("SET", "GET", "INCR", "MSET (10 keys)")]
print(f"| {sys.argv[1]} | " + " | ".join(cells) + " |")
' "$1, $([ "$2" = wan ] && echo WAN || echo no WAN), $([ "$3" = secure ] && echo "password + TLS" || echo "no security")"
  "$M" cluster down --config "$work/cluster.toml" >/dev/null
}

case "${1:-all}" in
  nowan) modes=(nowan) ;;
  wan) modes=(wan) ;;
  all) modes=(nowan wan) ;;
  *) echo "usage: $0 [nowan|wan|all]" >&2; exit 2 ;;
esac
echo "| deployment | SET | GET | INCR | MSET (10 keys) |"
echo "|---|---|---|---|---|"
for wan in "${modes[@]}"; do
  for protocol in 2pl-paxos tiga; do
    for security in open secure; do
      run "$protocol" "$wan" "$security"
    done
  done
done
