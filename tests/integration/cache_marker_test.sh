#!/usr/bin/env bash
# Black-box test: an interrupted ingest is detectable and a cache that does
# not hold its placement's samples never lets an agent train on it.
#   1. `loftctl ingest` that fails mid-way (file size limit = a full disk)
#      exits 1; `cache stat` reports ingest_complete false, `cache verify`
#      exits 3; a real loft-agent on that cache exits 1 before registering,
#      naming the node, expected and found counts and the fixing command.
#   2. A complete cache ingested for another spec (half the samples):
#      stat says complete, but the agent refuses it (expected 15000, found 7500).
#   3. Running the command the agent printed fixes the cache: stat complete,
#      verify 0, and the agent starts (prints its peer endpoint).
# usage: cache_marker_test.sh LOFTCTL LOFT_AGENT SOURCE_DIR
set -u
LOFTCTL=${1:?loftctl path}
AGENT=${2:?loft-agent path}
SRC=${3:?source dir}
SPEC=$SRC/examples/clusters/homogeneous.yaml
TMP=$(mktemp -d "${TMPDIR:-/tmp}/loft-cache-marker-XXXXXX")
AGENT_PID=""
cleanup() {
  if [ -n "$AGENT_PID" ]; then kill "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
. "$(dirname "$0")/check_lib.sh"
agent_config() {  # agent_config DB -> path of an insecure loopback agent config for edge-0
  cat >"$TMP/agent.yaml" <<YAML
node_name: edge-0
cluster_spec: $SPEC
cache_dir: $1
scheduler_endpoint: tcp://127.0.0.1:9
insecure: true
log_level: info
YAML
  echo "$TMP/agent.yaml"
}
# agent_refuses DB EXPECT...: the agent exits 1 within 60 s, stderr has each EXPECT.
agent_refuses() {
  local db=$1; shift
  timeout 60 "$AGENT" --config "$(agent_config "$db")" >"$TMP/agent.out" 2>"$TMP/agent.err"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "agent on $db exited $rc, want 1; stderr: $(cat "$TMP/agent.err")"
  grep -q peer_endpoint "$TMP/agent.out" && fail "agent on $db started serving: $(cat "$TMP/agent.out")"
  for e in "$@"; do expect_in "$TMP/agent.err" "$e"; done
}

# 1. An ingest cut short by the file size limit (EFBIG, like a full disk).
BAD=$TMP/bad
( ulimit -f 2048; trap '' XFSZ; exec "$LOFTCTL" ingest --cluster "$SPEC" --node edge-0 --db "$BAD" ) \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
[ "$rc" -eq 1 ] || fail "interrupted ingest exited $rc, want 1: $(cat "$TMP/err")"
expect_in "$TMP/err" "the cache is incomplete"
[ -e "$BAD/LOFT_INGESTED" ] && fail "an interrupted ingest left a completion marker"
expect_rc 0 "$LOFTCTL" cache stat --db "$BAD" --json && {
  expect_in "$TMP/out" '"ingest_complete": false'
  expect_in "$TMP/out" '"ingest": null'
}
expect_rc 0 "$LOFTCTL" cache stat --db "$BAD" && expect_in "$TMP/out" "ingest:       INCOMPLETE"
expect_rc 3 "$LOFTCTL" cache verify --db "$BAD" && expect_in "$TMP/out" "ingest incomplete"
found=$("$LOFTCTL" cache stat --db "$BAD" --json | grep -o '"samples": [0-9]*' | head -1 | grep -o '[0-9]*$')
agent_refuses "$BAD" "node edge-0" "expected 15000, found $found" \
  "loftctl ingest --cluster $SPEC --node edge-0 --db $BAD --overwrite"

# 2. A complete cache of another spec (30,000 samples -> 7,500 on edge-0).
sed 's/samples: 60000/samples: 30000/' "$SPEC" >"$TMP/half.yaml"
grep -q "samples: 30000" "$TMP/half.yaml" || fail "could not derive the half-size spec"
HALF=$TMP/half
expect_rc 0 "$LOFTCTL" ingest --cluster "$TMP/half.yaml" --node edge-0 --db "$HALF"
expect_rc 0 "$LOFTCTL" cache stat --db "$HALF" --json && expect_in "$TMP/out" '"ingest_complete": true'
expect_rc 0 "$LOFTCTL" cache verify --db "$HALF"
agent_refuses "$HALF" "node edge-0" "expected 15000, found 7500" "--node edge-0 --db $HALF --overwrite"

# 3. The command the agent printed repairs the cache.
fix=$(grep -o "loftctl ingest --cluster [^ ]* --node [^ ]* --db [^ ]* --overwrite" "$TMP/agent.err" | head -1)
if [ -z "$fix" ]; then
  fail "no fixing command in the agent's message"
else
  # shellcheck disable=SC2086
  expect_rc 0 "$LOFTCTL" ${fix#loftctl }
  expect_rc 0 "$LOFTCTL" cache stat --db "$HALF" --json && {
    expect_in "$TMP/out" '"ingest_complete": true'
    expect_in "$TMP/out" '"samples": 15000'
  }
  expect_rc 0 "$LOFTCTL" cache verify --db "$HALF"
  "$AGENT" --config "$(agent_config "$HALF")" >"$TMP/agent.out" 2>"$TMP/agent.err" &
  AGENT_PID=$!
  for _ in $(seq 1 300); do
    grep -q peer_endpoint "$TMP/agent.out" && break
    kill -0 "$AGENT_PID" 2>/dev/null || break
    sleep 0.1
  done
  grep -q peer_endpoint "$TMP/agent.out" || fail "agent did not start on the repaired cache: $(cat "$TMP/agent.err")"
  kill "$AGENT_PID" 2>/dev/null
  wait "$AGENT_PID" 2>/dev/null
  AGENT_PID=""
fi

finish cache_marker_test
