#!/usr/bin/env bash
# A profile-guided build of `meridian` for long simulations and sweeps
# (docs/build.md, "A faster simulator binary"). Three steps, each in its own
# target directory so the ordinary build is untouched:
#
#   1. an instrumented build (target/pgo-gen),
#   2. a short training run of every protocol in the simulator, with its
#      history checked (the same code paths the long runs take),
#   3. a build that uses the merged profile (target/pgo),
#
# and, where LLVM's post-link optimizer BOLT is installed (Debian: the
# bolt-16 package; LLVM_BOLT names another llvm-bolt, BOLT=0 skips it), a
# fourth that lays out the binary's machine code by where the simulator
# spends its time (docs/build.md, "Code laid out by a run"):
#
#   4. the binary instrumented by BOLT runs the simulator's training runs
#      again, and BOLT rewrites it from the counts.
#
# The result is target/pgo/release/meridian: the same program, the same
# traces (same trace hashes), fewer instructions and branch misses (and,
# after step 4, fewer instruction-cache misses). Both builds optimize the
# whole program at once (fat LTO, one codegen unit). The training runs take
# about a minute; the whole script ten to fifteen minutes on two cores.
# Needs rustup's llvm-tools component, which the script installs when it is
# missing.
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

# LLVM's post-link optimizer and its profile merger, if installed.
find_bolt() {
  [ "${BOLT:-1}" != 0 ] || return 0
  if [ -n "${LLVM_BOLT:-}" ]; then
    echo "$LLVM_BOLT"
    return 0
  fi
  command -v llvm-bolt 2>/dev/null && return 0
  ls -d /usr/lib/llvm-*/bin/llvm-bolt 2>/dev/null | sort -V | tail -n 1
}
bolt=$(find_bolt)
relocs_flag=
if [ -n "$bolt" ]; then
  merge_fdata=$(dirname "$bolt")/merge-fdata
  [ -x "$bolt" ] && [ -x "$merge_fdata" ] || { echo "build-pgo: $bolt or $merge_fdata is not an executable" >&2; exit 2; }
  # BOLT moves functions only in a binary that keeps its relocations.
  relocs_flag=-Clink-arg=-Wl,--emit-relocs
  echo "build-pgo: post-link layout by $bolt" >&2
elif [ "${BOLT:-1}" != 0 ]; then
  echo "build-pgo: llvm-bolt not found (Debian: apt-get install bolt-16); skipping the post-link layout" >&2
fi

steps=3
[ -z "$bolt" ] || steps=4
data="$root/target/pgo-data"
rm -rf "$data"
mkdir -p "$data"

# Both builds whole-program: fat LTO in one codegen unit, which the
# ordinary build leaves out for its rebuild time (docs/build.md, "Whole-
# program optimization"). LTO and CODEGEN_UNITS override (LTO=off for none).
export CARGO_PROFILE_RELEASE_LTO=${LTO:-fat}
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=${CODEGEN_UNITS:-1}

echo "build-pgo: 1/$steps instrumented build (target/pgo-gen)" >&2
RUSTFLAGS="-Cprofile-generate=$data $cpu_flag" CARGO_TARGET_DIR="$root/target/pgo-gen" cargo build --release -q -p meridian
gen="$root/target/pgo-gen/release/meridian"

echo "build-pgo: 2/$steps training runs" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for keys in 1000 1000000; do
  scripts/tiga-gcp-at.sh 4.0 "$keys" 0.5 >"$work/gcp-$keys.toml"
done
# A training run of the binary `$bin` that fails stops the build and shows
# what it said.
train() {
  "$bin" "$@" >/dev/null 2>"$work/train.err" || { cat "$work/train.err" >&2; echo "build-pgo: training run failed: meridian $*" >&2; exit 2; }
}
# Every protocol in the simulator; SWARMS=0 leaves out the swarms (whose
# worker threads the post-link instrumentation does not count safely).
train_all() {
  for p in 2pl-paxos tiga; do
    train sim --config "$work/gcp-1000.toml" --protocol "$p"
    train sim --config "$work/gcp-1000000.toml" --protocol "$p" --no-check
    train sim --config examples/list-append.toml --protocol "$p"
    [ "$SWARMS" = 0 ] || train swarm --protocol "$p" --seeds 4
  done
  for p in calvin slog; do
    train sim --config examples/slog-six-regions.toml --protocol "$p"
    [ "$SWARMS" = 0 ] || train swarm --protocol "$p" --seeds 2
  done
  for p in ra-noc2 ra-noc ramp-f ramp-s lora eiger-noc2 eiger-port; do
    train sim --config examples/ramp-ycsb.toml --protocol "$p"
    [ "$SWARMS" = 0 ] || train swarm --protocol "$p" --seeds 2
  done
}
bin=$gen SWARMS=1 train_all
"$profdata" merge -o "$data/merged.profdata" "$data"

echo "build-pgo: 3/$steps optimized build (target/pgo)" >&2
out="$root/target/pgo/release/meridian"
# Removed first, so that cargo copies its build there afresh even when
# nothing changed (an earlier run may have left the laid-out binary).
rm -f "$out"
RUSTFLAGS="-Cprofile-use=$data/merged.profdata $cpu_flag $relocs_flag" CARGO_TARGET_DIR="$root/target/pgo" cargo build --release -q -p meridian

if [ -n "$bolt" ]; then
  echo "build-pgo: 4/4 post-link layout (BOLT)" >&2
  fdata="$work/bolt"
  mkdir -p "$fdata"
  "$bolt" "$out" -instrument -o "$work/meridian-bolt-gen" -instrumentation-file="$fdata/prof.fdata" \
    -instrumentation-file-append-pid >"$work/bolt.log" 2>&1 || { cat "$work/bolt.log" >&2; exit 2; }
  bin="$work/meridian-bolt-gen" SWARMS=0 train_all
  "$merge_fdata" "$fdata"/prof.fdata.* >"$work/merged.fdata" 2>"$work/bolt.log" || { cat "$work/bolt.log" >&2; exit 2; }
  # Blocks in the order they run (ext-tsp), functions by how often they
  # call each other (hfsort+), cold code apart from hot; debug info kept.
  "$bolt" "$out" -o "$out.bolt" -data="$work/merged.fdata" -reorder-blocks=ext-tsp -reorder-functions=hfsort+ \
    -split-functions -split-all-cold -split-eh -icf=1 -use-gnu-stack -update-debug-sections >"$work/bolt.log" 2>&1 ||
    { cat "$work/bolt.log" >&2; exit 2; }
  # Renamed over the old file, not written into it: cargo's copy under
  # deps/ shares its inode.
  chmod 755 "$out.bolt"
  mv "$out.bolt" "$out"
fi
echo "target/pgo/release/meridian"
