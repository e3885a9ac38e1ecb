# Checks shared by the shell integration tests (sourced, not run). The
# sourcing script sets TMP (its scratch directory) before calling them.
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_rc WANT CMD...: runs CMD (output in $TMP/out, $TMP/err), checks rc.
expect_rc() {
  local want=$1; shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "'$*' exited $rc, want $want; stdout: $(cat "$TMP/out") stderr: $(cat "$TMP/err")"
    return 1
  fi
  return 0
}

expect_in() {  # expect_in FILE TEXT
  grep -qF -- "$2" "$1" || fail "'$2' not in $1: $(cat "$1")"
}

# finish NAME: exit 1 when a check failed, else print "NAME: ok".
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$1: $failures failure(s)" >&2
    exit 1
  fi
  echo "$1: ok"
}
