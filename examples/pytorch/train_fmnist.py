#!/usr/bin/env python3
"""Trains a small CNN on Fashion-MNIST through a local loft agent (agent
compute_mode external, spec training.model external): one process per
agent, batches from loft.torch.LoftBatches, gradients all-reduced by the
agents' ring (the spec's aggregation rule, b_i/B weights), the optimizer
step here; with the spec's training.exchange period > 1 or auto, local
steps and an all-reduce of the round's model delta (loft.torch.Exchange). Every trainer starts from the same seed, so the parameters stay
identical on every member (the agents check a hash of them each round).

    loftctl cluster run SPEC --trainer 'python3 examples/pytorch/train_fmnist.py'
(the launcher sets LOFT_CONSUMER_ENDPOINT and LOFT_NODE for each agent's trainer, and
LOFT_RESTARTED=1 for one it restarts with its node after a spec `failures` entry)

    python3 train_fmnist.py --reference --steps 300 --batch 256   # one process, no loft

Prints one JSON line at the end: {"node", "rounds", "applied", "test_accuracy", "param_hash", ...}.
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = os.environ.get("LOFT_DATASET_DIR", "/usr/share/datasets/fashion-mnist")


def load_idx(kind):
    with gzip.open(os.path.join(DATA, f"{kind}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DATA, f"{kind}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))


class SmallCNN(nn.Module):
    """Two stride-2 3x3 convolutions and a linear layer (~21k parameters): cheap on one CPU thread."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.relu(self.c2(x))
        return self.fc(x.flatten(1))


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)

    def forward(self, x):
        return self.fc(x.flatten(1))


def make(args):
    torch.manual_seed(args.seed)
    model = SmallCNN() if args.model == "cnn" else Linear()
    if args.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    return model, opt


def lr_of(args, step):
    """lr, divided by 10 for the last third of the run (a function of the round: equal on every trainer,
    and right after a restart)."""
    total = args.iterations if not args.reference else args.steps
    return args.lr * (0.1 if total > 0 and step >= (2 * total) // 3 else 1.0)


def set_lr(opt, args, step):
    for g in opt.param_groups:
        g["lr"] = lr_of(args, step)


def decode(x, y):
    return x.view(-1, 1, 28, 28).float().div_(255.0), y


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    correct = 0
    for i in range(0, len(y), 2000):
        correct += (model(decode(x[i:i + 2000], None)[0]).argmax(1) == y[i:i + 2000]).sum().item()
    model.train()
    return correct / len(y)


def reference(args):
    """The same model, optimizer and number of steps in one process, batches of the global batch size."""
    model, opt = make(args)
    x, y = load_idx("train")
    tx, ty = load_idx("t10k")
    g = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(y), generator=g)
    at = 0
    t0 = time.time()
    for step in range(args.steps):
        if at + args.batch > len(y):
            order = torch.randperm(len(y), generator=g)
            at = 0
        idx = order[at:at + args.batch]
        at += args.batch
        xb, yb = decode(x[idx], y[idx])
        set_lr(opt, args, step)
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    from loft.torch import parameter_hash
    print(json.dumps({"reference": True, "steps": args.steps, "batch": args.batch,
                      "test_accuracy": evaluate(model, tx, ty), "param_hash": f"{parameter_hash(model):016x}",
                      "seconds": round(time.time() - t0, 1)}), flush=True)


def train(args):
    from loft import LoftError
    from loft.torch import Exchange, LoftBatches, parameter_hash, sync_state
    endpoint = args.endpoint or os.environ.get("LOFT_CONSUMER_ENDPOINT")
    if not endpoint:
        sys.exit("train_fmnist: no consumer endpoint (--endpoint or LOFT_CONSUMER_ENDPOINT)")
    node = os.environ.get("LOFT_NODE", "?")
    model, opt = make(args)
    tx, ty = load_idx("t10k")
    batches = LoftBatches(endpoint, transform=decode, timeout_ms=args.idle_timeout_ms)
    if args.sync:
        r = sync_state(model, opt, batches)
        print(f"[{node}] synced state of round {r}", file=sys.stderr, flush=True)
    rounds = applied = samples = errors = 0
    last_round = -1

    def corrupt_delta(d):
        if args.byzantine == "sign_flip":
            d.mul_(-args.byzantine_scale)
        elif args.byzantine == "nan":
            d.fill_(float("nan"))

    # Every training.exchange mode: period 1 all-reduces gradients, period > 1 / auto takes local steps and
    # all-reduces the round's model delta (loft.torch.Exchange).
    ex = Exchange(model, opt, lr_at=lambda step: lr_of(args, step), corrupt_delta=corrupt_delta)
    round_hashes = {}  # round -> the parameter and state hashes after its exchange
    t0 = time.time()
    for x, y, batch in batches:
        opt.zero_grad()
        loss = float("nan")
        if len(y):
            out = model(x)
            l = F.cross_entropy(out, y)
            l.backward()
            loss = l.item()
            # A Byzantine member corrupts what it exchanges: the gradient, or with local steps the
            # round's delta (corrupt_delta above).
            if batch.delta_exchange:
                pass
            elif args.byzantine == "sign_flip":
                for p in model.parameters():
                    p.grad.mul_(-args.byzantine_scale)
            elif args.byzantine == "nan":
                for p in model.parameters():
                    p.grad.fill_(float("nan"))
        set_lr(opt, args, batch.round)
        try:
            step = ex.step(batch)
        except LoftError as e:
            errors += 1
            print(f"[{node}] round {batch.round}: {e}", file=sys.stderr, flush=True)
            step = False
        if step:
            applied += 1
        if step and not batch.local_step:
            round_hashes[batch.round] = [f"{ex.agreed_hash():016x}", f"{ex.state_hash():016x}"]
        rounds += 1
        samples += len(y)
        last_round = max(last_round, batch.round)
        acc = float("nan")
        final = args.iterations > 0 and batch.round >= args.iterations - 1
        if args.eval_every and (batch.round + 1) % args.eval_every == 0 or final:
            acc = evaluate(model, tx, ty)
            print(f"[{node}] round {batch.round}: loss {loss:.4f} test accuracy {acc:.4f}", file=sys.stderr,
                  flush=True)
        batch.set_metrics(loss, acc, ex.agreed_hash())
        if final:
            batch.report((time.time() - t0) * 0)  # acknowledge before leaving the loop
            break
    print(json.dumps({"node": node, "rounds": rounds, "applied": applied, "samples": samples, "errors": errors,
                      "exchanges": ex.exchanges, "local_steps": ex.local_steps,
                      "round_hashes": {str(r): h for r, h in sorted(round_hashes.items())},
                      "last_round": last_round, "test_accuracy": evaluate(model, tx, ty),
                      "param_hash": f"{parameter_hash(model):016x}", "seconds": round(time.time() - t0, 1)}),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", help="the agent's consumer endpoint (default $LOFT_CONSUMER_ENDPOINT)")
    ap.add_argument("--model", choices=["cnn", "linear"], default="cnn")
    ap.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--iterations", type=int, default=int(os.environ.get("LOFT_ITERATIONS", "0")),
                    help="stop after this round (default $LOFT_ITERATIONS; 0: when batches stop)")
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--idle-timeout-ms", type=int, default=20000)
    ap.add_argument("--sync", action="store_true", default=os.environ.get("LOFT_RESTARTED") == "1",
                    help="take the ring majority's state first (a restart; default when $LOFT_RESTARTED is 1, "
                    "as cluster run sets it for a trainer it restarts with its node)")
    ap.add_argument("--byzantine", choices=["none", "sign_flip", "nan"], default="none")
    ap.add_argument("--byzantine-scale", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reference", action="store_true", help="train in this process only (no loft)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    reference(args) if args.reference else train(args)


if __name__ == "__main__":
    main()
