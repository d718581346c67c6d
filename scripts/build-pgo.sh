#!/usr/bin/env bash
# A profile-guided build of `meridian` for long simulations and sweeps
# (docs/build.md, "A faster simulator binary"). Three steps, each in its own
# target directory so the ordinary build is untouched:
#
#   1. an instrumented build (target/pgo-gen),
#   2. a short training run of every protocol in the simulator, with its
#      history checked (the same code paths the long runs take),
#   3. a build that uses the merged profile (target/pgo).
#
# The result is target/pgo/release/meridian: the same program, the same
# traces (same trace hashes), fewer instructions and branch misses. The
# training runs take about a minute; the two builds take as long as two
# clean release builds. Needs rustup's llvm-tools component, which the script
# installs when it is missing.
#
#   scripts/build-pgo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  echo "build-pgo: installing rustup's llvm-tools component (for llvm-profdata)" >&2
  rustup component add llvm-tools-preview >&2
fi
[ -x "$profdata" ] || { echo "build-pgo: llvm-profdata not found at $profdata" >&2; exit 2; }

data="$root/target/pgo-data"
rm -rf "$data"
mkdir -p "$data"

echo "build-pgo: 1/3 instrumented build (target/pgo-gen)" >&2
RUSTFLAGS="-Cprofile-generate=$data" CARGO_TARGET_DIR="$root/target/pgo-gen" cargo build --release -q -p meridian
gen="$root/target/pgo-gen/release/meridian"

echo "build-pgo: 2/3 training runs" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for keys in 1000 1000000; do
  scripts/tiga-gcp-at.sh 4.0 "$keys" 0.5 >"$work/gcp-$keys.toml"
done
# A training run that fails stops the build and shows what it said.
train() {
  "$gen" "$@" >/dev/null 2>"$work/train.err" || { cat "$work/train.err" >&2; echo "build-pgo: training run failed: meridian $*" >&2; exit 2; }
}
for p in 2pl-paxos tiga; do
  train sim --config "$work/gcp-1000.toml" --protocol "$p"
  train sim --config "$work/gcp-1000000.toml" --protocol "$p" --no-check
  train sim --config examples/list-append.toml --protocol "$p"
  train swarm --protocol "$p" --seeds 4
done
for p in calvin slog; do
  train sim --config examples/slog-six-regions.toml --protocol "$p"
  train swarm --protocol "$p" --seeds 2
done
for p in ra-noc2 ra-noc ramp-f ramp-s lora eiger-noc2 eiger-port; do
  train sim --config examples/ramp-ycsb.toml --protocol "$p"
  train swarm --protocol "$p" --seeds 2
done
"$profdata" merge -o "$data/merged.profdata" "$data"

echo "build-pgo: 3/3 optimized build (target/pgo)" >&2
RUSTFLAGS="-Cprofile-use=$data/merged.profdata" CARGO_TARGET_DIR="$root/target/pgo" cargo build --release -q -p meridian
echo "target/pgo/release/meridian"
