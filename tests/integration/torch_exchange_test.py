"""PyTorch on loft with every training.exchange mode: three agents
(compute_mode external, spec training.model external, aggregation mean),
one examples/pytorch/train_fmnist.py trainer each (the small CNN, SGD with
momentum 0.9, loft.torch.Exchange), run twice on the same spec: once with
the default exchange (period 1: a gradient all-reduce every step) and once
with `exchange: {period: 4, compression: int8, overlap: true}`.

Period 4, int8, overlap:
  - every trainer took ITER - ITER/4 local steps and ran exactly ITER/4
    all-reduces (one per round: the rounds ending at iterations 3, 7, ...),
    with no errors;
  - after every round's exchange every trainer holds the same parameters
    and the same optimizer state (parameter hash and hash of the state
    bytes, momentum buffers included, per round) and the same at the end;
  - the agents logged an exchange of model deltas with int8 chunks;
  - the test accuracy is within 4 points of the period-1 run's and >= 0.70.
Period 1: ITER all-reduces per trainer, no local steps, identical hashes.
Both runs end with the ledger's lost 0 / duplicates 0.
env: LOFT_BIN_DIR, LOFT_IT_DIR, LOFT_SOURCE_DIR, LOFT_PYTHONPATH."""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loft_it  # noqa: E402
import torch_lib  # noqa: E402

ITER = int(os.environ.get("LOFT_TORCH_ITERATIONS", "160"))
PERIOD = 4
NODES = 3
ARGS = ["--model", "cnn", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]


def run(exchange):
    text = torch_lib.SPEC.format(samples=12000, replication=1, batch=192, iterations=ITER, aggregation="mean",
                                 nodes=NODES)
    if exchange:
        text = text.replace("aggregation: mean}", "aggregation: mean, exchange: " + exchange + "}")
        assert "exchange:" in text, text
    tc = torch_lib.TorchCluster(nodes=NODES, samples=12000, batch=192, iterations=ITER, spec_text=text)
    try:
        tc.start()
        for n in tc.names:
            tc.start_trainer(n, *ARGS)
        res = tc.wait_trainers(900)
        st = tc.c.wait_for(lambda s: s["finished"], 120, "job finished")
        logs = ""
        for f in glob.glob(os.path.join(tc.tmp, "*.log")):
            if "trainer-" not in f:
                with open(f, errors="replace") as fh:
                    logs += fh.read()
    finally:
        tc.stop()
    for n, r in res.items():
        loft_it.log(f"{exchange or 'period 1'}: {n}: " +
                    str({k: v for k, v in r.items() if k != "round_hashes"}))
    loft_it.check_ledger(st, 0)
    return res, logs


def same_state_every_round(res, want_rounds):
    names = sorted(res)
    for n in names:
        got = sorted(int(r) for r in res[n]["round_hashes"])
        assert got == want_rounds, (f"{n} exchanged at rounds {got[:12]}...: missing "
                                    f"{sorted(set(want_rounds) - set(got))}, extra {sorted(set(got) - set(want_rounds))}")
        assert res[n]["errors"] == 0, res[n]
        assert res[n]["last_round"] == ITER - 1, res[n]
    for r in want_rounds:
        hashes = {tuple(res[n]["round_hashes"][str(r)]) for n in names}
        assert len(hashes) == 1, f"round {r}: the trainers hold different states: {hashes}"
    assert len({r["param_hash"] for r in res.values()}) == 1, f"different final parameters: {res}"


p4, p4_logs = run(f"{{period: {PERIOD}, compression: int8, overlap: true}}")
rounds4 = list(range(PERIOD - 1, ITER, PERIOD))
assert ITER % PERIOD == 0, ITER
same_state_every_round(p4, rounds4)
for n, r in p4.items():
    assert r["exchanges"] == ITER // PERIOD, f"{n}: {r['exchanges']} all-reduces for {ITER // PERIOD} rounds"
    assert r["local_steps"] == ITER - ITER // PERIOD, f"{n}: {r['local_steps']} local steps"
assert "exchange of model deltas after local steps, compression int8" in p4_logs, "no agent ran a delta int8 ring"

p1, _ = run("")
same_state_every_round(p1, list(range(ITER)))
for n, r in p1.items():
    assert r["exchanges"] == ITER and r["local_steps"] == 0, f"{n}: {r}"

acc4, acc1 = p4["edge-0"]["test_accuracy"], p1["edge-0"]["test_accuracy"]
print(f"{NODES} agents, {ITER} steps: period 1 test accuracy {acc1:.4f} ({ITER} all-reduces), period {PERIOD} "
      f"int8 overlap {acc4:.4f} ({ITER // PERIOD} all-reduces)")
assert acc4 >= 0.70, f"period {PERIOD}: test accuracy {acc4:.4f} < 0.70"
assert abs(acc4 - acc1) <= 0.04, f"period {PERIOD} {acc4:.4f} vs period 1 {acc1:.4f}"
