"""Trainer for torch_exactness_test.py: takes its agent's batches, computes
the mean cross-entropy gradient of the example's model (float64, the seed's
initial parameters, never stepped) on each, all-reduces it through loft
(loft.torch.allreduce_gradients) and saves (round, sample ids, outcome,
aggregate) per batch to --out. argv: --endpoint --model --out --iterations."""
import argparse
import importlib.util
import os
import sys

import torch
import torch.nn.functional as F

from loft import LoftError
from loft.torch import LoftBatches, allreduce_gradients

ap = argparse.ArgumentParser()
ap.add_argument("--endpoint", required=True)
ap.add_argument("--model", default="linear")
ap.add_argument("--out", required=True)
ap.add_argument("--iterations", type=int, required=True)
args = ap.parse_args()
spec = importlib.util.spec_from_file_location("train_fmnist", os.environ["LOFT_TRAINER"])
tf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tf)
torch.manual_seed(7)
model = (tf.SmallCNN() if args.model == "cnn" else tf.Linear()).double()
records = []
for x, y, batch in LoftBatches(args.endpoint, timeout_ms=20000):
    model.zero_grad()
    if len(y):
        F.cross_entropy(model(x.view(-1, 1, 28, 28).double() / 255.0), y).backward()
    try:
        outcome = 1 if allreduce_gradients(model, batch) else 0
    except LoftError as e:
        print(f"round {batch.round}: {e}", file=sys.stderr)
        outcome = -1
    agg = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone() if outcome == 1 else None
    records.append({"round": batch.round, "ids": list(batch.sample_ids), "outcome": outcome, "aggregate": agg})
    if batch.round >= args.iterations - 1:
        batch.report(1.0)
        break
torch.save(records, args.out)
print(f"{len(records)} batches", flush=True)
