#!/bin/sh
# expect_exit.sh CODE REGEX COMMAND [ARG...]
# Runs COMMAND and passes only when it exits with status CODE and its
# output (stdout and stderr together) matches the extended regular
# expression REGEX. For ctest: one test checks both a command-line tool's
# exit status and its message (WILL_FAIL accepts any non-zero status, and a
# PASS_REGULAR_EXPRESSION makes ctest ignore the exit status).
set -u
if [ "$#" -lt 3 ]; then
  echo "usage: expect_exit.sh CODE REGEX COMMAND [ARG...]" >&2
  exit 2
fi
want="$1"
pattern="$2"
shift 2
out="$("$@" 2>&1)"
got=$?
printf '%s\n' "$out"
fail=0
if [ "$got" -ne "$want" ]; then
  echo "expect_exit.sh: $1 exited with status $got, expected $want" >&2
  fail=1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "expect_exit.sh: the output of $1 does not match /$pattern/" >&2
  fail=1
fi
exit "$fail"
