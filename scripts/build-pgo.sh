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
# The binary is for the machine that builds it: on an x86-64 machine with
# AVX2 (and the rest of the x86-64-v3 level) it uses those instructions,
# which the ordinary build cannot assume. It does not go past that level,
# so valgrind (scripts/instructions.sh) still runs it. TARGET_CPU overrides
# the choice (`x86-64` for the portable baseline, `native` for everything
# this CPU has).
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

# rustc's name for the CPU level the build may assume (see above).
target_cpu() {
  [ "$(uname -m)" = x86_64 ] || return 0
  local have
  have=$(rustc --print cfg -C target-cpu=native)
  for f in avx avx2 bmi1 bmi2 f16c fma lzcnt movbe xsave; do
    grep -q "target_feature=\"$f\"" <<<"$have" || return 0
  done
  echo x86-64-v3
}
cpu=${TARGET_CPU-$(target_cpu)}
cpu_flag=${cpu:+-Ctarget-cpu=$cpu}
echo "build-pgo: CPU level ${cpu:-x86-64 (the default)}" >&2

data="$root/target/pgo-data"
rm -rf "$data"
mkdir -p "$data"

echo "build-pgo: 1/3 instrumented build (target/pgo-gen)" >&2
RUSTFLAGS="-Cprofile-generate=$data $cpu_flag" CARGO_TARGET_DIR="$root/target/pgo-gen" cargo build --release -q -p meridian
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
RUSTFLAGS="-Cprofile-use=$data/merged.profdata $cpu_flag" CARGO_TARGET_DIR="$root/target/pgo" cargo build --release -q -p meridian
echo "target/pgo/release/meridian"
