#!/usr/bin/env bash
# examples/tiga-gcp.toml with its run length, warm-up and key space set, on
# stdout: the configuration every measuring script runs (docs/flat-cost.md).
# The warm-up defaults to a tenth of the run, at most 5 s.
#
#   scripts/tiga-gcp-at.sh DURATION_S KEYS_PER_SHARD [WARMUP_S] > exp.toml
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/tiga-gcp-at.sh DURATION_S KEYS_PER_SHARD [WARMUP_S]" >&2; exit 2; }
duration=$1
keys=$2
warmup=${3:-$(awk -v d="$duration" 'BEGIN { w = d / 10; if (w > 5) w = 5; print w }')}
sed -e "s/^duration_s = .*/duration_s = $duration/" -e "s/^warmup_s = .*/warmup_s = $warmup/" \
  -e "s/^keys_per_shard = .*/keys_per_shard = $keys/" "$(dirname "$0")/../examples/tiga-gcp.toml"
