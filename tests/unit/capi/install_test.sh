#!/bin/sh
# Installs the build into a temp prefix and builds examples/c/plan.c
# against it twice: with pkg-config and with a find_package(loft) CMake
# project; runs both. Proves an outside program finds loft.
# Usage: install_test.sh BUILD_DIR WORK_DIR SOURCE_DIR CC CMAKE
set -eu
BUILD="$1"; WORK="$2"; SRC="$3"; CC="$4"; CMAKE="$5"
rm -rf "$WORK"
mkdir -p "$WORK"
PREFIX="$WORK/prefix"
"$CMAKE" --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log"
for f in include/loft/loft.h include/loft/version.h; do
  test -f "$PREFIX/$f" || { echo "install_test: $f not installed"; exit 1; }
done
PC=$(find "$PREFIX" -name loft.pc | head -n 1)
test -n "$PC" || { echo "install_test: loft.pc not installed"; exit 1; }
LIBDIR=$(dirname "$(dirname "$PC")")
test -f "$LIBDIR/libloft.so" || { echo "install_test: libloft.so not in $LIBDIR"; exit 1; }
test -f "$LIBDIR/cmake/loft/loftConfig.cmake" || { echo "install_test: loftConfig.cmake missing"; exit 1; }

# 1. pkg-config, with the prefix written into loft.pc rewritten to ours
#    (cmake --install --prefix does not reconfigure the file).
export PKG_CONFIG_PATH="$(dirname "$PC")"
CFLAGS=$(pkg-config --define-variable=prefix="$PREFIX" --cflags loft)
LIBS=$(pkg-config --define-variable=prefix="$PREFIX" --libs loft)
echo "install_test: pkg-config loft: $CFLAGS $LIBS (version $(pkg-config --modversion loft))"
# shellcheck disable=SC2086
"$CC" -std=c99 -pedantic -Wall -Werror $CFLAGS "$SRC/examples/c/plan.c" $LIBS -o "$WORK/plan-pkgconfig"
LD_LIBRARY_PATH="$LIBDIR" "$WORK/plan-pkgconfig" >"$WORK/pkgconfig.out"
cat "$WORK/pkgconfig.out"
grep -q "policy loft" "$WORK/pkgconfig.out"
grep -q "lower bound" "$WORK/pkgconfig.out"

# 2. find_package(loft) from a separate CMake project.
"$CMAKE" -S "$SRC/tests/unit/capi/find_package_project" -B "$WORK/fp-build" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_C_COMPILER="$CC" -DLOFT_EXAMPLE_SOURCE="$SRC/examples/c/plan.c" >"$WORK/fp-configure.log"
"$CMAKE" --build "$WORK/fp-build" >"$WORK/fp-build.log"
LD_LIBRARY_PATH="$LIBDIR" "$WORK/fp-build/plan" >"$WORK/find_package.out"
grep -q "policy loft" "$WORK/find_package.out"
cmp "$WORK/pkgconfig.out" "$WORK/find_package.out"
echo "install_test: ok (pkg-config and find_package builds agree)"
