# Sourced by the scripts that measure the compare deployment
# (examples/cluster-compare.toml) as real local processes: builds meridian,
# sets $M and a scratch $work that is removed (its cluster stopped) on exit,
# and defines compare_cluster_up.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -q
M=target/release/meridian
work=$(mktemp -d)
trap '"$M" cluster down --config "$work/cluster.toml" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# compare_cluster_up EMULATE_WAN [PROTOCOL]: (re)starts the compare cluster
# from empty storage, with the WAN emulated (true) or not, running PROTOCOL
# (default the file's).
compare_cluster_up() {
  sed -e "s/^emulate_wan = .*/emulate_wan = $1/" -e "s#^data_dir = .*#data_dir = \"$work/data\"#" \
    -e "s/^name = \"2pl-paxos\"/name = \"${2:-2pl-paxos}\"/" examples/cluster-compare.toml >"$work/cluster.toml"
  "$M" cluster down --config "$work/cluster.toml" >/dev/null 2>&1 || true
  rm -rf "$work/data"
  "$M" cluster up --config "$work/cluster.toml" >/dev/null
}
