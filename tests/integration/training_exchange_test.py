"""Exchange modes on real processes: with `training.exchange: {period: 4}`
each of 4 agents takes 3 local SGD steps, then the ring all-reduces the
round's model deltas. Every agent reports the same (agreed) parameter hash
after every step, every exchange's update holds all 4 partitions of its
step, only the 4th step of each round (a round also ends at an epoch's last
samples and at the job's last step) runs the ring, and the MLP still
learns Fashion-MNIST. Then the same with int8 compression."""
import loft_it
import training_lib

ITER = 240  # 2 epochs of 60000 at global batch 512
SAMPLES = 60000
BATCH = 512


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
    # exchange's holds the 4 partitions of its step. A round ends after 4
    # steps, at the job's last step, and at the step that hands out an
    # epoch's last samples (its local steps are committed with the round,
    # so the epoch can complete); the next round counts from there.
    # An epoch's last step takes its remainder alone: ceil(60000 / 512) = 118
    # steps per epoch, so epochs end at steps 117 and 235.
    steps_per_epoch = -(-SAMPLES // BATCH)
    epoch_ends = {k * steps_per_epoch - 1 for k in (1, 2)}
    in_round = 0
    for e in sorted(its, key=lambda e: e["iteration"]):
        in_round += 1
        exchanged = in_round == 4 or e["iteration"] == ITER - 1 or e["iteration"] in epoch_ends
        want = 4 if exchanged else 0
        assert e.get("applied", 0) == want, (name, e, sorted(epoch_ends))
        if exchanged:
            in_round = 0
    assert st["committed_by_ring"] == 0, st["committed_by_ring"]
    return acc


acc4 = check("exch4", " exchange: {period: 4},", 0.80)
acc8 = check("exch4i8", " exchange: {period: 4, compression: int8},", 0.80)
print("ok", acc4, acc8)
