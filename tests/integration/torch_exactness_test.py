"""Exactness of the gradient exchange for PyTorch models: three agents with
uneven batches (their compute costs differ, so the planner gives them
different b_i), aggregation mean, one trainer each (torch_exact_trainer.py:
float64 gradients of the seed's parameters, never stepped). For every round
where every member applied the aggregate (no carried partition), the
aggregate every member received equals the gradient of the whole global
batch (the union of that round's batches) computed in this process:
torch.allclose(rtol=1e-5, atol=1e-7) (the ring carries float32), for the
linear model and for the example's CNN; and it differs from the plain mean
of the members' gradients when the b_i differ (so the b_i/B weights are
what makes it exact). env: LOFT_BIN_DIR, LOFT_IT_DIR, LOFT_SOURCE_DIR,
LOFT_PYTHONPATH."""
import collections
import importlib.util
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loft_it  # noqa: E402
import torch_lib  # noqa: E402

NODES = """  - name: fast
    count: 1
    compute: {fixed_ms: 1.0, per_sample_ms: 0.02, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
  - name: mid
    count: 1
    compute: {fixed_ms: 1.0, per_sample_ms: 0.06, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
  - name: slow
    count: 1
    compute: {fixed_ms: 1.0, per_sample_ms: 0.2, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""
ITER = 4
SRC = torch_lib.SRC
spec = importlib.util.spec_from_file_location("train_fmnist", torch_lib.TRAINER)
tf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tf)
x_all, y_all = tf.load_idx("train")


def run(model_name):
    text = torch_lib.SPEC.split("nodes:")[0].format(samples=6000, replication=2, batch=120, iterations=ITER,
                                                    aggregation="mean", nodes=3) + "nodes:\n" + NODES
    tc = torch_lib.TorchCluster(nodes=3, samples=6000, batch=120, iterations=ITER, spec_text=text,
                                names=["fast", "mid", "slow"])
    try:
        tc.start()
        env = torch_lib.env()
        env["LOFT_TRAINER"] = torch_lib.TRAINER
        procs = {}
        for n in tc.names:
            procs[n] = subprocess.Popen([torch_lib.PY, os.path.join(os.path.dirname(__file__), "torch_exact_trainer.py"),
                                         "--endpoint", tc.endpoints[n], "--model", model_name, "--out",
                                         os.path.join(tc.tmp, f"{n}.pt"), "--iterations", str(ITER)],
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n, p in procs.items():
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, (n, out, err)
        records = {n: torch.load(os.path.join(tc.tmp, f"{n}.pt")) for n in tc.names}
    finally:
        tc.stop()
    torch.manual_seed(7)
    model = (tf.SmallCNN() if model_name == "cnn" else tf.Linear()).double()
    by_round = collections.defaultdict(list)
    for n, recs in records.items():
        for r in recs:
            by_round[r["round"]].append((n, r))
    carried = {r["round"] + 1 for recs in records.values() for r in recs if r["outcome"] == 0}
    checked = 0
    for rnd, entries in sorted(by_round.items()):
        if rnd in carried or any(r["outcome"] != 1 for _, r in entries) or len(entries) != 3:
            continue
        ids = [i for _, r in entries for i in r["ids"]]
        sizes = [len(r["ids"]) for _, r in entries]
        model.zero_grad()
        idx = torch.tensor(ids)
        F.cross_entropy(model(x_all[idx].view(-1, 1, 28, 28).double() / 255.0), y_all[idx]).backward()
        whole = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone()
        # The plain (unweighted) mean of the members' gradients, to show the weights matter.
        grads = []
        for _, r in entries:
            if not r["ids"]:
                continue
            model.zero_grad()
            i = torch.tensor(r["ids"])
            F.cross_entropy(model(x_all[i].view(-1, 1, 28, 28).double() / 255.0), y_all[i]).backward()
            grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone())
        plain = torch.stack(grads).mean(0)
        for n, r in entries:
            ok = torch.allclose(r["aggregate"], whole, rtol=1e-5, atol=1e-7)
            err = ((r["aggregate"] - whole).abs() / (whole.abs() + 1e-7)).max().item()
            assert ok, f"{model_name} round {rnd} on {n}: aggregate != whole-batch gradient (max rel err {err:.2e})"
        weighted_matters = len(set(s for s in sizes if s > 0)) > 1
        if weighted_matters:
            assert not torch.allclose(plain, whole, rtol=1e-5, atol=1e-7), "plain mean equals the weighted one"
        loft_it.log(f"{model_name} round {rnd}: batch sizes {sizes}, {whole.numel()} params: aggregate == "
                    f"whole-batch gradient on every member (plain mean differs: {weighted_matters})")
        checked += 1
    assert checked >= 2, f"only {checked} rounds checkable: {dict((k, [(n, r['outcome'], len(r['ids'])) for n, r in v]) for k, v in by_round.items())}"
    return checked


for m in ("linear", "cnn"):
    print(f"ok {m}: {run(m)} rounds exact")
