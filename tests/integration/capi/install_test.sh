#!/bin/sh
# An outside program finds an installed loft from any prefix.
#  1. `cmake --install BUILD --prefix STAGE`, then the tree is moved to a
#     different directory PREFIX (so nothing may depend on the prefix given
#     at install time, nor on the build tree).
#  2. loft.pc and the CMake package hold no absolute path of the build or
#     stage directory; libloft.so resolves every dependency with no
#     LD_LIBRARY_PATH and has no RUNPATH into the build tree.
#  3. With only PREFIX's paths in a clean environment: the C example of
#     capi/README.md and examples/c/plan.c compile with pkg-config and run;
#     examples/c/plan.c builds in a find_package(loft) CMake project and
#     runs; both builds print the same plan.
# Usage: install_test.sh BUILD_DIR WORK_DIR SOURCE_DIR CC CMAKE
set -eu
BUILD="$1"; WORK="$2"; SRC="$3"; CC="$4"; CMAKE="$5"
fail() { echo "install_test: FAIL: $*"; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK"
STAGE="$WORK/stage"
PREFIX="$WORK/moved/opt-loft"
"$CMAKE" --install "$BUILD" --prefix "$STAGE" >"$WORK/install.log"
mkdir -p "$WORK/moved"
mv "$STAGE" "$PREFIX"

for f in include/loft/loft.h include/loft/version.h; do
  test -f "$PREFIX/$f" || fail "$f not installed"
done
PC=$(find "$PREFIX" -name loft.pc | head -n 1)
test -n "$PC" || fail "loft.pc not installed"
PCDIR=$(dirname "$PC")
LIBDIR=$(dirname "$PCDIR")
test -f "$LIBDIR/libloft.so" || fail "libloft.so not in $LIBDIR"
test -f "$LIBDIR/cmake/loft/loftConfig.cmake" || fail "loftConfig.cmake missing"

# 2. Nothing points back at the stage prefix or the build tree.
for f in "$PC" "$LIBDIR"/cmake/loft/*.cmake; do
  if grep -n -e "$STAGE" -e "$BUILD" "$f"; then fail "$f names the install-time prefix or the build tree"; fi
done
if readelf -d "$LIBDIR/libloft.so" | grep -E "R(UN)?PATH" | grep -e "$BUILD" -e "$STAGE"; then
  fail "libloft.so has a RUNPATH into the build tree or stage prefix"
fi
LDD=$(env -u LD_LIBRARY_PATH ldd "$LIBDIR/libloft.so")
if echo "$LDD" | grep "not found"; then fail "libloft.so does not find its dependencies"; fi

# 3. A clean environment with only PREFIX's paths: PKG_CONFIG_LIBDIR
#    replaces pkg-config's default search path, so no other loft.pc is seen.
clean() {
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$WORK" PKG_CONFIG_LIBDIR="$PCDIR" "$@"
}
CFLAGS=$(clean pkg-config --cflags loft)
LIBS=$(clean pkg-config --libs loft)
echo "install_test: pkg-config loft: $CFLAGS $LIBS (version $(clean pkg-config --modversion loft))"
case "$CFLAGS" in *"$PREFIX"*) ;; *) fail "pkg-config --cflags '$CFLAGS' does not point into $PREFIX" ;; esac

# The C example of capi/README.md ("Using libloft from outside"), verbatim.
sed -n '/^## Using libloft from outside/,/^Full examples/p' "$SRC/capi/README.md" |
  awk '/^```c$/{f=1;next} /^```$/{f=0} f' >"$WORK/readme_example.c"
test -s "$WORK/readme_example.c" || fail "no C example found in capi/README.md"
# shellcheck disable=SC2086
clean "$CC" -std=c99 -pedantic -Wall -Werror $CFLAGS "$WORK/readme_example.c" $LIBS -o "$WORK/readme-example"
clean LD_LIBRARY_PATH="$LIBDIR" "$WORK/readme-example" >"$WORK/readme.out"
cat "$WORK/readme.out"
grep -q "^node 0: [0-9]* samples" "$WORK/readme.out" || fail "README example printed no plan"
grep -q "^makespan [0-9.]* ms" "$WORK/readme.out" || fail "README example printed no makespan"

# shellcheck disable=SC2086
clean "$CC" -std=c99 -pedantic -Wall -Werror $CFLAGS "$SRC/examples/c/plan.c" $LIBS -o "$WORK/plan-pkgconfig"
clean LD_LIBRARY_PATH="$LIBDIR" "$WORK/plan-pkgconfig" >"$WORK/pkgconfig.out"
cat "$WORK/pkgconfig.out"
grep -q "policy loft" "$WORK/pkgconfig.out" || fail "plan.c (pkg-config) printed no plan"
grep -q "lower bound" "$WORK/pkgconfig.out" || fail "plan.c (pkg-config) printed no bound"

# find_package(loft) from a separate CMake project, CMAKE_PREFIX_PATH only.
clean "$CMAKE" -S "$SRC/tests/integration/capi/find_package_project" -B "$WORK/fp-build" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_C_COMPILER="$CC" -DLOFT_EXAMPLE_SOURCE="$SRC/examples/c/plan.c" >"$WORK/fp-configure.log"
grep -q "^loft_DIR:PATH=$LIBDIR/cmake/loft$" "$WORK/fp-build/CMakeCache.txt" ||
  fail "find_package(loft) did not find the package under $PREFIX: $(grep loft_DIR "$WORK/fp-build/CMakeCache.txt")"
clean "$CMAKE" --build "$WORK/fp-build" >"$WORK/fp-build.log"
# CMake's build-tree RUNPATH finds libloft.so: no LD_LIBRARY_PATH.
clean "$WORK/fp-build/plan" >"$WORK/find_package.out"
grep -q "policy loft" "$WORK/find_package.out" || fail "plan (find_package) printed no plan"
cmp "$WORK/pkgconfig.out" "$WORK/find_package.out" || fail "pkg-config and find_package builds differ"
echo "install_test: ok (prefix moved after install; README example, pkg-config and find_package builds run)"
