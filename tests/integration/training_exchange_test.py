"""Exchange modes on real processes: with `training.exchange: {period: 4}`
each of 4 agents takes 3 local SGD steps, then the ring all-reduces the
round's model deltas. Every agent reports the same (agreed) parameter hash
after every step, every exchange's update holds all 4 partitions of its
step, only every 4th step (and the last) runs the ring, and the MLP still
learns Fashion-MNIST. Then the same with int8 compression."""
import loft_it
import training_lib

ITER = 240  # 2 epochs of 60000 at global batch 512


def check(name, extra, min_acc):
    summary, rows, out = training_lib.run(name, honest=4, iterations=ITER, aggregation="mean", lr=0.05,
                                          eval_every=60, training_extra=extra)
    tr = summary["training"]
    loft_it.log(f"{name}: training summary: {tr}")
    assert tr["hash_mismatches"] == 0, f"agents disagree on parameters: {tr}"
    assert tr["iterations_reported"] == ITER, tr
    acc = summary["final_accuracy"]
    assert acc is not None and acc >= min_acc, f"{name}: final test accuracy {acc} < {min_acc}"
    st = training_lib.status(out)
    its = st["training"]["iterations"]
    assert len(its) == ITER, len(its)
    # A local step's update holds no partition (nothing exchanged); an
    # exchange's holds the 4 partitions of its step.
    for e in its:
        exchanged = (e["iteration"] + 1) % 4 == 0 or e["iteration"] == ITER - 1
        want = 4 if exchanged else 0
        assert e.get("applied", 0) == want, (name, e)
    assert st["committed_by_ring"] == 0, st["committed_by_ring"]
    return acc


acc4 = check("exch4", " exchange: {period: 4},", 0.80)
acc8 = check("exch4i8", " exchange: {period: 4, compression: int8},", 0.80)
print("ok", acc4, acc8)
