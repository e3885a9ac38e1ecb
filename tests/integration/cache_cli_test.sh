#!/usr/bin/env bash
# Integration test of the cache commands of the real loftctl binary:
#   ingest --all on example specs -> per-node `cache stat --json` sums to
#   samples x replication; a record corrupted underneath the cache makes
#   `cache verify` exit 3 naming the id (and `cache get` refuse it); bad
#   specs, a missing db and a non-empty target dir are clear errors.
# usage: cache_cli_test.sh LOFTCTL CORRUPT_TOOL SOURCE_DIR
set -u
LOFTCTL=${1:?loftctl path}
CORRUPT=${2:?cache_corrupt_record path}
SRC=${3:?source dir}
SPECS=$SRC/examples/clusters
TMP=$(mktemp -d "${TMPDIR:-/tmp}/loft-cache-cli-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/check_lib.sh"
json_int() { grep -o "\"$1\": [0-9]*" | head -1 | grep -o '[0-9]*$'; }
spec_int() { grep -o "$2: *[0-9]*" "$1" | head -1 | grep -o '[0-9]*$'; }

# 1. ingest --all; counts add up to samples x replication.
for spec in homogeneous failure; do
  root=$TMP/$spec
  expect_rc 0 "$LOFTCTL" ingest --cluster "$SPECS/$spec.yaml" --all --root "$root" || continue
  # The dataset manifest sits next to the node caches (cache/manifest.h).
  [ -s "$root/MANIFEST.loft" ] || fail "$spec: no $root/MANIFEST.loft after ingest --all"
  samples=$(spec_int "$SPECS/$spec.yaml" samples)
  repl=$(spec_int "$SPECS/$spec.yaml" replication)
  total=0
  nodes=0
  for db in "$root"/*; do
    [ -d "$db" ] || continue
    expect_rc 0 "$LOFTCTL" cache stat --db "$db" --json || continue
    n=$(json_int samples <"$TMP/out")
    b=$(json_int bytes <"$TMP/out")
    [ "$b" -eq $((n * 784)) ] || fail "$db: bytes $b != samples $n x 784"
    grep -q '"label_counts"' "$TMP/out" || fail "$db: no label_counts in stat JSON"
    total=$((total + n))
    nodes=$((nodes + 1))
    expect_rc 0 "$LOFTCTL" cache verify --db "$db"
  done
  [ "$nodes" -ge 2 ] || fail "$spec: only $nodes node caches under $root"
  msize=$(stat -c %s "$root/MANIFEST.loft")
  [ "$msize" -eq $((16 + samples * 16 + 32)) ] || fail "$spec: MANIFEST.loft is $msize bytes for $samples samples"
  [ "$total" -eq $((samples * repl)) ] || fail "$spec: node samples sum to $total, want $samples x $repl"
  echo "ok: $spec: $nodes nodes hold $total samples = $samples x $repl"
done

# 2. corruption is detected, named, and never served.
db=$TMP/homogeneous/edge-0
id=$("$LOFTCTL" cache get --db "$db" --id 0 >/dev/null 2>&1 && echo 0)
if [ -z "$id" ]; then
  # Find an id held by edge-0: the first one `cache get` accepts.
  for i in $(seq 1 200); do
    if "$LOFTCTL" cache get --db "$db" --id "$i" >/dev/null 2>&1; then id=$i; break; fi
  done
fi
if [ -z "$id" ]; then
  fail "no sample id in 0..200 found in $db"
else
  expect_rc 0 "$LOFTCTL" cache get --db "$db" --id "$id" --out "$TMP/payload.bin"
  [ "$(stat -c %s "$TMP/payload.bin")" -eq 784 ] || fail "get --out wrote $(stat -c %s "$TMP/payload.bin") bytes, want 784"
  grep -q "label" "$TMP/out" || fail "get printed no label: $(cat "$TMP/out")"
  expect_rc 0 "$CORRUPT" "$db" "$id" flip
  if expect_rc 3 "$LOFTCTL" cache verify --db "$db"; then
    grep -q "bad sample $id:" "$TMP/out" || fail "verify output does not name sample $id: $(cat "$TMP/out")"
    echo "ok: verify exits 3 and names sample $id"
  fi
  rm -f "$TMP/bad.bin"
  expect_rc 3 "$LOFTCTL" cache get --db "$db" --id "$id" --out "$TMP/bad.bin"
  [ ! -e "$TMP/bad.bin" ] || fail "get wrote a corrupt payload"
  grep -q "sample $id" "$TMP/err" || fail "get error does not name sample $id: $(cat "$TMP/err")"
fi

# 3. errors: missing db (and nothing created), bad specs, non-empty target.
expect_rc 1 "$LOFTCTL" cache stat --db "$TMP/missing" && grep -q "missing" "$TMP/err"
[ ! -e "$TMP/missing" ] || fail "cache stat created $TMP/missing"
expect_rc 1 "$LOFTCTL" cache verify --db "$TMP/missing"
expect_rc 1 "$LOFTCTL" cache get --db "$TMP/missing" --id 1
[ ! -e "$TMP/missing" ] || fail "cache verify/get created $TMP/missing"

check_bad_spec() {  # NAME SED_EXPR EXPECTED_TEXT
  sed "$2" "$SPECS/homogeneous.yaml" >"$TMP/$1.yaml"
  if expect_rc 1 "$LOFTCTL" ingest --cluster "$TMP/$1.yaml" --all --root "$TMP/r-$1"; then
    grep -q "$3" "$TMP/err" || fail "$1: error lacks '$3': $(cat "$TMP/err")"
  fi
  [ ! -e "$TMP/r-$1" ] || fail "$1: a rejected spec still created caches"
}
check_bad_spec too_many 's/samples: 60000/samples: 60001/' "only 60000 samples"
check_bad_spec wrong_name 's/name: fashion-mnist/name: cifar10/' "only 'fashion-mnist'"
check_bad_spec wrong_bytes 's/sample_bytes: 784/sample_bytes: 1024/' "28x28 = 784"
expect_rc 1 "$LOFTCTL" ingest --cluster "$SPECS/homogeneous.yaml" --node nosuch --db "$TMP/x" &&
  grep -q "no node named 'nosuch'" "$TMP/err" || fail "unknown node not named"
expect_rc 1 "$LOFTCTL" ingest --cluster "$SPECS/homogeneous.yaml" --node edge-1 --db "$TMP/homogeneous/edge-1" &&
  grep -q -- "--overwrite" "$TMP/err" || fail "non-empty target not refused"
expect_rc 0 "$LOFTCTL" ingest --cluster "$SPECS/homogeneous.yaml" --node edge-0 --db "$db" --overwrite
expect_rc 0 "$LOFTCTL" cache verify --db "$db"
expect_rc 1 "$LOFTCTL" ingest --cluster "$SPECS/homogeneous.yaml" --node edge-0 --db "$TMP/t" --split test &&
  grep -q "test split has only 10000" "$TMP/err" || fail "60000-sample spec accepted for the test split"
sed 's/samples: 60000/samples: 10000/' "$SPECS/homogeneous.yaml" >"$TMP/test-split.yaml"
if expect_rc 0 "$LOFTCTL" ingest --cluster "$TMP/test-split.yaml" --node edge-0 --db "$TMP/test-split" --split test; then
  expect_rc 0 "$LOFTCTL" cache stat --db "$TMP/test-split" --json
  [ "$(json_int samples <"$TMP/out")" -eq 2500 ] || fail "test split edge-0: $(cat "$TMP/out")"
fi
expect_rc 2 "$LOFTCTL" ingest --cluster "$SPECS/homogeneous.yaml" --all --db "$TMP/y"

finish cache_cli_test
