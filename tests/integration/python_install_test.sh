#!/bin/sh
# The loft Python package from an install prefix and from pip, with only
# that prefix's paths set:
#  1. cmake --install BUILD --prefix T/prefix; then with a clean environment
#     PYTHONPATH=T/prefix/lib/python3/dist-packages python3 -c 'import loft.torch'
#     loads T/prefix/lib/libloft.so (found next to the package);
#  2. pip install --no-index --target T/pip SRC/python (no network), then
#     import loft.torch with LOFT_LIBRARY=T/prefix/lib/libloft.so.
# argv: BUILD TMPDIR SRC PYTHON
set -eu
build=$1 tmp=$2 src=$3 py=$4
rm -rf "$tmp" && mkdir -p "$tmp"
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
site="$tmp/prefix/lib/python3/dist-packages"
test -f "$site/loft/torch.py"
lib=$(env -i PATH=/usr/bin:/bin PYTHONPATH="$site" "$py" -c 'import loft, loft.torch; print(loft.library())')
echo "import loft.torch from the prefix: libloft = $lib"
case "$lib" in "$tmp/prefix/"*) ;; *) echo "loaded $lib, not the prefix's library" >&2; exit 1 ;; esac
"$py" -m pip install --no-index --no-deps --target "$tmp/pip" "$src/python" >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log" >&2; exit 1; }
env -i PATH=/usr/bin:/bin PYTHONPATH="$tmp/pip" LOFT_LIBRARY="$tmp/prefix/lib/libloft.so" \
  "$py" -c 'import loft, loft.torch; print("pip-installed loft", loft.version())'
echo ok
