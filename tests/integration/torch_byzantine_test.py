"""Byzantine-robust aggregation for PyTorch trainers: six agents
(compute_mode external, spec training.model external), one trainer each
(examples/pytorch/train_fmnist.py, linear model, Adam), policy uniform (b = 32
of 192 each), ITER rounds, three runs:
  clean      aggregation trimmed_mean, six honest trainers;
  trimmed    aggregation trimmed_mean, edge-5 sends its gradient sign-flipped x10;
  mean       aggregation mean, the same Byzantine edge-5.
trimmed must end within 2 points of clean; mean must visibly fail (more
than 10 points below clean). Honest trainers end with identical
parameters in every run. env: LOFT_BIN_DIR, LOFT_SOURCE_DIR, LOFT_PYTHONPATH."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loft_it  # noqa: E402
import torch_lib  # noqa: E402

ITER = int(os.environ.get("LOFT_TORCH_BYZ_ITERATIONS", "300"))
ARGS = ["--model", "linear", "--optimizer", "adam", "--lr", "0.003"]


def run(aggregation, byzantine):
    # Uniform batches: every trainer, the Byzantine one too, gets b = 32 of 192 (with loft's uneven
    # plans its b_i/B share under `mean` varies from run to run).
    tc = torch_lib.TorchCluster(nodes=6, samples=12000, batch=192, iterations=ITER, aggregation=aggregation,
                                policy="uniform")
    t0 = time.time()
    try:
        tc.start()
        for n in tc.names:
            extra = ["--byzantine", "sign_flip", "--byzantine-scale", "10"] if byzantine and n == "edge-5" else []
            tc.start_trainer(n, *ARGS, *extra)
        res = tc.wait_trainers(900)
        st = tc.c.wait_for(lambda s: s["finished"], 120, "job finished")
    finally:
        tc.stop()
    honest = [r for n, r in res.items() if not (byzantine and n == "edge-5")]
    assert len({r["param_hash"] for r in honest}) == 1, f"{aggregation}: honest trainers differ: {res}"
    loft_it.check_ledger(st, 0)
    acc = honest[0]["test_accuracy"]
    loft_it.log(f"{aggregation} byzantine={byzantine}: test accuracy {acc:.4f} ({time.time() - t0:.0f} s)")
    return acc


clean = run("trimmed_mean", False)
trimmed = run("trimmed_mean", True)
mean = run("mean", True)
print(f"clean trimmed_mean {clean:.4f}, 1/6 sign-flip x10: trimmed_mean {trimmed:.4f}, mean {mean:.4f}")
assert abs(trimmed - clean) <= 0.02, f"trimmed_mean under attack {trimmed:.4f} vs clean {clean:.4f}"
assert mean < clean - 0.10, f"mean under attack {mean:.4f} should fail visibly (clean {clean:.4f})"
