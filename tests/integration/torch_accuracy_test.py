"""PyTorch on loft reaches the accuracy of one process: four agents
(compute_mode external, spec training.model external, aggregation mean,
60,000 Fashion-MNIST samples sharded), one trainer each
(examples/pytorch/train_fmnist.py: the small CNN, Adam lr 0.003, global
batch 256) for ITER rounds. Every trainer must end with the same parameter
hash and >= 87% test accuracy, and a single-process reference (same model,
optimizer, seed, global batch and number of steps) measured in this test
must be within 1.5 points. The ledger ends with lost 0 / duplicates 0.
env: LOFT_BIN_DIR, LOFT_SOURCE_DIR, LOFT_PYTHONPATH."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loft_it  # noqa: E402
import torch_lib  # noqa: E402

ITER = int(os.environ.get("LOFT_TORCH_ITERATIONS", "1200"))
ARGS = ["--model", "cnn", "--optimizer", "adam", "--lr", "0.003"]
tc = torch_lib.TorchCluster(nodes=4, samples=60000, batch=256, iterations=ITER)
try:
    t0 = time.time()
    tc.start()
    for n in tc.names:
        tc.start_trainer(n, *ARGS)
    res = tc.wait_trainers(1500)
    loft_dt = time.time() - t0
    st = tc.c.wait_for(lambda s: s["finished"], 120, "job finished")
finally:
    tc.stop()
for n, r in res.items():
    loft_it.log(f"{n}: {r}")
hashes = {r["param_hash"] for r in res.values()}
assert len(hashes) == 1, f"trainers ended with different parameters: {res}"
acc = res["edge-0"]["test_accuracy"]
assert all(r["last_round"] == ITER - 1 for r in res.values()), res
t1 = time.time()
ref = torch_lib.reference(*ARGS, "--steps", str(ITER), "--batch", "256")
ref_dt = time.time() - t1
loft_it.log(f"reference: {ref}")
loft_it.check_ledger(st, 0)
print(f"loft 4 agents: test accuracy {acc:.4f} in {loft_dt:.0f} s; one process: {ref['test_accuracy']:.4f} "
      f"in {ref_dt:.0f} s; ledger {st['ledger']}")
assert acc >= 0.87, f"test accuracy {acc:.4f} < 0.87"
assert abs(acc - ref["test_accuracy"]) <= 0.015, f"loft {acc:.4f} vs one process {ref['test_accuracy']:.4f}"
