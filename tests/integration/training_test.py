"""A 4-agent `loftctl cluster run` trains the MLP on Fashion-MNIST
(real gradients, ZeroMQ ring all-reduce between the agents, SGD) and
reaches >= 85% test accuracy; every agent holds identical parameters after
every iteration (same ParameterHash); every iteration's reports agree the
applied update holds all 4 partitions (TrainingReport.applied_partitions,
which the scheduler uses to commit rather than retry a partition the ring
applied); training.csv has loss and test accuracy over wall time."""
import math

import loft_it
import training_lib

ITER = 480  # 4 epochs of 60000 at global batch 512 (~20 s here)
summary, rows, out = training_lib.run("train4", honest=4, iterations=ITER, aggregation="mean", lr=0.05,
                                      eval_every=60)
tr = summary["training"]
loft_it.log(f"training summary: {tr}")
assert tr["model"] == "mlp", tr
assert tr["hash_mismatches"] == 0, f"agents disagree on parameters: {tr}"
assert tr["iterations_reported"] == ITER, tr
acc = summary["final_accuracy"]
assert acc is not None and acc >= 0.85, f"final test accuracy {acc} < 0.85"
assert summary["policies"]["uniform"]["final_accuracy"] == acc
# training.csv: loss falls, accuracy rows present with wall times.
losses = [float(r["loss"]) for r in rows if r["loss"]]
assert len(losses) == ITER, len(losses)
assert all(math.isfinite(x) for x in losses)
assert sum(losses[-20:]) / 20 < 0.6 * sum(losses[:5]) / 5, (losses[:5], losses[-20:])
accs = [(float(r["wall_s"]), float(r["test_accuracy"])) for r in rows if r["test_accuracy"]]
assert len(accs) == ITER // 60, accs
assert all(b[0] >= a[0] for a, b in zip(accs, accs[1:])), accs
st = training_lib.status(out)
its = st["training"]["iterations"]
assert len(its) == ITER, len(its)
bad = [e for e in its if e.get("applied") != 4]
assert not bad, bad[:3]
assert st["committed_by_ring"] == 0, st["committed_by_ring"]  # nothing failed
print("ok", acc, accs)
