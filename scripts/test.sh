#!/bin/sh
# Builds loft with warnings as errors and runs every test, then rebuilds
# the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer and
# runs them again, built with CMake's default generator (Unix Makefiles)
# so both generators are exercised. Usage: scripts/test.sh   (after scripts/install-deps.sh)
set -eu
cd "$(dirname "$0")/.."
JOBS="${LOFT_JOBS:-$(nproc)}"
LAUNCHER=""
if command -v ccache >/dev/null 2>&1; then LAUNCHER="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"; fi

echo "== build (RelWithDebInfo, -Werror) =="
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOFT_WERROR=ON $LAUNCHER
cmake --build build -j "$JOBS"

echo "== tests =="
(cd build && ctest --output-on-failure -j "$JOBS" --timeout 600)

echo "== unit tests and fuzz replays under ASan/UBSan (CMake's default generator) =="
# This build uses CMake's default generator (Unix Makefiles), the one a
# newcomer gets from `cmake -S . -B b && cmake --build b`: every library
# and unit test goes through it. It builds the target loft_unit_tests
# (tests/CMakeLists.txt), what the unit and fuzz tests run, not the daemons'
# and tools' own sources, which the first build compiled with the same
# flags but -O. A build-asan directory left by an older Ninja-configured run
# is not reused (generator mismatch).
# shellcheck disable=SC2086
cmake -S . -B build-asan-make -DCMAKE_BUILD_TYPE=Debug -DLOFT_WERROR=ON -DLOFT_SANITIZE=ON \
  -DLOFT_BUILD_BENCH=OFF $LAUNCHER
cmake --build build-asan-make -j "$JOBS" --target loft_unit_tests
(cd build-asan-make && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$JOBS" -L '^(unit|fuzz)$' --timeout 900)
echo "== fuzz targets (libFuzzer, ${LOFT_FUZZ_SECONDS:-30} s each) =="
LOFT_JOBS="$JOBS" ./scripts/fuzz.sh
echo "== all tests passed =="
