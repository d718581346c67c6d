#!/usr/bin/env bash
# A three-member etcd cluster on loopback, for `meridian bench --target etcd`.
#
#     scripts/etcd-cluster.sh up [DIR]      # start (data and logs in DIR, default target/etcd)
#     scripts/etcd-cluster.sh status [DIR]
#     scripts/etcd-cluster.sh down [DIR]
#
# Members m0, m1, m2 serve clients on 127.0.0.1:2379, :22379 and :42379 (their
# v3 JSON gateway included) and talk to each other on :2380, :22380 and :42380.
# Needs Debian's etcd-server package (apt-get install etcd-server).
set -euo pipefail

action=${1:-up}
dir=${2:-target/etcd}
client_port() { echo $((2379 + 20000 * $1)); }
peer_port() { echo $((2380 + 20000 * $1)); }
endpoints="http://127.0.0.1:2379,http://127.0.0.1:22379,http://127.0.0.1:42379"
initial="m0=http://127.0.0.1:2380,m1=http://127.0.0.1:22380,m2=http://127.0.0.1:42380"

healthy() { curl -fsS "http://127.0.0.1:$(client_port "$1")/health" 2>/dev/null | grep -q '"health":"true"'; }

case "$action" in
up)
  command -v etcd >/dev/null || { echo "etcd not found: apt-get install etcd-server" >&2; exit 2; }
  mkdir -p "$dir"
  for i in 0 1 2; do
    if [ -f "$dir/m$i.pid" ] && kill -0 "$(cat "$dir/m$i.pid")" 2>/dev/null; then
      echo "m$i already running"; continue
    fi
    cp=$(client_port $i); pp=$(peer_port $i)
    etcd --name "m$i" --data-dir "$dir/m$i" \
      --listen-client-urls "http://127.0.0.1:$cp" --advertise-client-urls "http://127.0.0.1:$cp" \
      --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
      --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token meridian-bench \
      >"$dir/m$i.log" 2>&1 &
    echo $! >"$dir/m$i.pid"
  done
  for _ in $(seq 1 100); do
    if healthy 0 && healthy 1 && healthy 2; then
      echo "etcd up: --endpoints $endpoints"; exit 0
    fi
    sleep 0.2
  done
  echo "etcd did not become healthy; see $dir/m*.log" >&2; exit 1
  ;;
status)
  for i in 0 1 2; do
    if healthy $i; then echo "m$i healthy"; else echo "m$i down"; fi
  done
  ;;
down)
  for i in 0 1 2; do
    if [ -f "$dir/m$i.pid" ]; then
      pid=$(cat "$dir/m$i.pid")
      # Only an etcd we started: the pid file's process must still be etcd.
      if grep -q etcd "/proc/$pid/cmdline" 2>/dev/null; then
        kill "$pid"
        # Wait for it to exit, so that its data directory can be removed.
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      fi
      rm -f "$dir/m$i.pid"
    fi
  done
  echo "etcd stopped"
  ;;
*)
  echo "usage: $0 up|status|down [DIR]" >&2; exit 2
  ;;
esac
