#!/bin/sh
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and
# runs each for a fixed time budget, starting from the checked-in seed
# corpus tests/fuzz/corpus/<name> and the kept crash inputs
# tests/fuzz/regressions/<name>. New inputs go to a scratch corpus under
# the build directory, never into the source tree. A crash fails the
# script and leaves its input in build-fuzz/crashes/<name>/: fix the bug,
# then copy the input to tests/fuzz/regressions/<name>/.
#
# Which targets run (a fixed budget per CI run, tests/fuzz/README.md
# "Running"): every run fuzzes the three decoders (codec, cluster_spec,
# cache_record) for half the time each, the scheduler target for the full
# time, and ONE of the other targets for the full time, chosen by the UTC
# day of the year (agent, ring, adopt_state, state_restore, loaders,
# consumer, calibrate, metrics_http in turn): 3 x 15 s + 2 x 30 s = 105 s
# at the default. Only those targets are built. LOFT_FUZZ_TARGETS="a b ..." (or "all") runs
# exactly those, each for the full time.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default: LOFT_FUZZ_SECONDS or 30)
set -eu
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-${LOFT_FUZZ_SECONDS:-30}}"
JOBS="${LOFT_JOBS:-$(nproc)}"
BUILD="${LOFT_FUZZ_BUILD:-build-fuzz}"
LAUNCHER=""
if command -v ccache >/dev/null 2>&1; then LAUNCHER="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"; fi
DECODERS="codec cluster_spec cache_record"
ROTATING="agent ring adopt_state state_restore loaders consumer calibrate metrics_http"
if [ -n "${LOFT_FUZZ_TARGETS:-}" ]; then
  TARGETS="$LOFT_FUZZ_TARGETS"
  if [ "$TARGETS" = all ]; then TARGETS="$DECODERS scheduler $ROTATING"; fi
  DECODERS=""
else
  day=$(date -u +%j | sed 's/^0*//')  # 008 is not octal
  # shellcheck disable=SC2086
  set -- $ROTATING
  shift $((${day:-0} % $#))
  TARGETS="$DECODERS scheduler $1"
fi

echo "== fuzz build (clang, libFuzzer + ASan/UBSan) =="
mkdir -p "$BUILD"
# shellcheck disable=SC2086
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DLOFT_FUZZ=ON -DLOFT_BUILD_TESTS=OFF -DLOFT_BUILD_BENCH=OFF \
  -DLOFT_WITH_CUDA_IF_FOUND=OFF $LAUNCHER >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
set --
for t in $TARGETS; do set -- "$@" "fuzz_$t"; done
cmake --build "$BUILD" -j "$JOBS" --target "$@"

for t in $TARGETS; do
  seconds="$SECONDS_PER_TARGET"
  case " $DECODERS " in *" $t "*) seconds=$(((SECONDS_PER_TARGET + 1) / 2)) ;; esac
  echo "== fuzz_$t: ${seconds} s =="
  work="$BUILD/corpus/$t"
  crashes="$BUILD/crashes/$t"
  mkdir -p "$work" "$crashes"
  # First directory: scratch corpus (written); the others are read only.
  set -- "$work" "tests/fuzz/corpus/$t"
  if [ -d "tests/fuzz/regressions/$t" ]; then set -- "$@" "tests/fuzz/regressions/$t"; fi
  if ! "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$crashes/" "$@" >"$BUILD/fuzz_$t.log" 2>&1; then
    tail -n 60 "$BUILD/fuzz_$t.log"
    echo "fuzz: fuzz_$t failed; input kept in $crashes/"
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$BUILD/fuzz_$t.log" | tail -n 2
done
echo "== fuzz: no crash in $TARGETS =="
