#!/bin/sh
# The main job on a local default cluster: builds loft, then runs the
# example cluster (examples/clusters/homogeneous.yaml: four edge agents and
# a scheduler as real processes on loopback, training an MLP on
# Fashion-MNIST) once per policy, then shows what the simulator is for:
# `loftctl calibrate` fits the spec to the first policy's real run, and
# loft-sim predicts every policy twice, from the spec as written and from
# the calibrated spec. tools/compare_runs.py prints per policy the real
# mean iteration next to both predictions and their ratios (real /
# predicted), marks the calibration policy "(fit)", and says for how many
# of the others (held out) the calibrated prediction is within 10 %.
#
# Output under LOFT_OUT: cluster-<policy>/ (each real run), sim/ (loft-sim
# on the spec), calibrated.yaml (the fitted spec, its notes at the top),
# sim-calibrated/ (loft-sim on it). docs/fidelity.md "The main job".
#
# Environment overrides: LOFT_SPEC (cluster spec), LOFT_POLICIES (comma
# separated), LOFT_ITERATIONS (0 = the spec's), LOFT_OUT (output dir).
set -eu
cd "$(dirname "$0")/.."
SPEC="${LOFT_SPEC:-examples/clusters/homogeneous.yaml}"
POLICIES="${LOFT_POLICIES:-loft,lbbsp,uniform}"
ITERATIONS="${LOFT_ITERATIONS:-0}"
OUT="${LOFT_OUT:-out/example}"
JOBS="$(nproc)"
LAUNCHER=""
if command -v ccache >/dev/null 2>&1; then LAUNCHER="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"; fi

echo "== build =="
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $LAUNCHER >/dev/null
cmake --build build -j "$JOBS" --target loftctl loft-scheduler loft-agent loft-sim

rm -rf "$OUT"
mkdir -p "$OUT"
for policy in $(echo "$POLICIES" | tr ',' ' '); do
  echo "== cluster run: $SPEC, policy $policy =="
  build/bin/loftctl cluster run "$SPEC" --policy "$policy" --iterations "$ITERATIONS" \
    --cache-root out/caches --out "$OUT/cluster-$policy"
done

echo "== simulator: $SPEC as written (its priors) =="
if [ "$ITERATIONS" -gt 0 ]; then SIM_IT="--iterations $ITERATIONS"; else SIM_IT=""; fi
# shellcheck disable=SC2086
# --eval-every 50: the real runs evaluate on the test set as often
# (loftctl cluster run's default); loft-sim charges it (sim/README.md).
build/bin/loft-sim run "$SPEC" --policy "$POLICIES" $SIM_IT --eval-every 50 --out "$OUT/sim"

FIRST="${POLICIES%%,*}"
echo "== calibrate on the $FIRST run =="
build/bin/loftctl calibrate "$OUT/cluster-$FIRST" --out "$OUT/calibrated.yaml"
echo "== simulator: the calibrated spec =="
# shellcheck disable=SC2086
build/bin/loft-sim run "$OUT/calibrated.yaml" --policy "$POLICIES" $SIM_IT --eval-every 50 --out "$OUT/sim-calibrated"

echo "== real runs against loft-sim's predictions =="
python3 tools/compare_runs.py "$OUT" --calibrated-on "$FIRST"
