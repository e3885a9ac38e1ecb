"""6 agents, one Byzantine (sign_flip, scaled x10). With
trimmed_mean (one trimmed per side) and with median the run reaches >= 80% test accuracy;
with mean it ends below 50% (or diverges: no finite accuracy). The
other gradient attacks (random, nan) still leave median at >= 80%. All runs
share the ingested caches."""
import os
import tempfile

import loft_it
import training_lib

caches = tempfile.mkdtemp(prefix="loft-it-byz-caches-")
ITER = 360
robust, _, _ = training_lib.run("byz-trimmed", honest=5, byzantine="sign_flip", scale=10, iterations=ITER, lr=0.05,
                                aggregation="trimmed_mean", eval_every=80, cache_root=caches)
acc_r = robust["final_accuracy"]
loft_it.log(f"trimmed_mean: final accuracy {acc_r}, {robust['training']}")
assert robust["training"]["hash_mismatches"] == 0, robust["training"]
assert acc_r is not None and acc_r >= 0.80, f"trimmed_mean with 1 Byzantine: accuracy {acc_r} < 0.80"

med, _, _ = training_lib.run("byz-median", honest=5, byzantine="sign_flip", scale=10, iterations=ITER, lr=0.05,
                             aggregation="median", eval_every=80, cache_root=caches)
acc_med = med["final_accuracy"]
loft_it.log(f"median: final accuracy {acc_med}, {med['training']}")
assert med["training"]["hash_mismatches"] == 0, med["training"]
assert acc_med is not None and acc_med >= 0.80, f"median with 1 Byzantine: accuracy {acc_med} < 0.80"

# random and nan against median: 240 steps (measured 2026-11-29: 0.843 and
# 0.835 at step 240, sign_flip 0.82 there, hence its 360).
for kind in ("random", "nan"):
    r, _, _ = training_lib.run(f"byz-{kind}", honest=5, byzantine=kind, scale=10, iterations=240, lr=0.05,
                               aggregation="median", eval_every=120, cache_root=caches)
    acc = r["final_accuracy"]
    loft_it.log(f"median against {kind}: final accuracy {acc}, {r['training']}")
    assert r["training"]["hash_mismatches"] == 0, r["training"]
    assert acc is not None and acc >= 0.80, f"median with 1 Byzantine ({kind}): accuracy {acc} < 0.80"

plain, _, _ = training_lib.run("byz-mean", honest=5, byzantine="sign_flip", scale=10, iterations=60,
                               aggregation="mean", eval_every=30, cache_root=caches)
acc_m = plain["final_accuracy"]
loft_it.log(f"mean: final accuracy {acc_m}, {plain['training']}")
assert acc_m is None or acc_m < 0.50, f"mean with 1 Byzantine should break, got accuracy {acc_m}"
print("ok", acc_r, acc_med, acc_m)
