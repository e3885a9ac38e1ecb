#!/usr/bin/env bash
# Black-box test of the spec and file checks through the real
# loftctl: each bad spec is refused with exit 1 and a message naming the
# field (before the fix: '..' and 'scheduler' were accepted, a huge
# dataset.samples aborted with an uncaught std::bad_alloc, min_batch x nodes
# wrapped around).
# usage: spec_files_test.sh LOFTCTL
set -u
LOFTCTL=${1:?loftctl path}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/loft-spec-files-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/check_lib.sh"
node() {  # node NAME [COUNT]
  echo "  - {name: '$1', count: ${2:-1}, compute: {fixed_ms: 1, per_sample_ms: 0.1}, disk: {read_mbps: 100}, link: {up_mbps: 10, down_mbps: 10, latency_ms: 1}}"
}
spec() {  # spec FILE SAMPLES TRAINING NODE_LINES...
  local f=$1 samples=$2 training=$3; shift 3
  { echo "dataset: {samples: $samples}"; echo "training: $training"; echo "nodes:"; printf '%s\n' "$@"; } >"$f"
}
refused() {  # refused FILE EXPECTED_TEXT
  timeout 120 "$LOFTCTL" plan --cluster "$1" --policy loft --json >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$(basename "$1"): loftctl plan exited $rc, want 1; stderr: $(cat "$TMP/err")"
  grep -qF -- "$2" "$TMP/err" || fail "$(basename "$1"): '$2' not in: $(cat "$TMP/err")"
  grep -q "terminate called" "$TMP/err" && fail "$(basename "$1"): uncaught exception"
}
T='{global_batch: 64, min_batch: 1}'
spec "$TMP/dotdot.yaml" 1000 "$T" "$(node ..)" "$(node b)"
refused "$TMP/dotdot.yaml" "nodes[0].name must start with a letter or digit (got '..')"
spec "$TMP/dot.yaml" 1000 "$T" "$(node .)" "$(node b)"
refused "$TMP/dot.yaml" "nodes[0].name must start with a letter or digit (got '.')"
spec "$TMP/sched.yaml" 1000 "$T" "$(node a)" "$(node scheduler)"
refused "$TMP/sched.yaml" "nodes[1].name 'scheduler' is reserved"
spec "$TMP/ctl.yaml" 1000 "$T" "$(node loftctl)" "$(node b)"
refused "$TMP/ctl.yaml" "nodes[0].name 'loftctl' is reserved"
spec "$TMP/huge.yaml" 1000000000000 "$T" "$(node a)" "$(node b)"
refused "$TMP/huge.yaml" "dataset.samples must be <= 1000000000"
spec "$TMP/ovf.yaml" 1000 '{global_batch: 64, min_batch: 4611686018427387904}' "$(node a 4)"
refused "$TMP/ovf.yaml" "training.min_batch times the number of nodes (4611686018427387904 x 4) exceeds"
# A good spec of the same shape plans.
spec "$TMP/good.yaml" 1000 "$T" "$(node a)" "$(node b)"
"$LOFTCTL" plan --cluster "$TMP/good.yaml" --policy loft --json >"$TMP/out" 2>"$TMP/err" ||
  fail "good spec: $(cat "$TMP/err")"
finish spec_files_test
