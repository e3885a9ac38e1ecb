#!/usr/bin/env python3
"""torch_consumer_bench: PyTorch through loft, two figures, one JSON object on stdout.

1. Data path. samples/s delivered into torch tensors by loft.torch.LoftBatches
   (a 1-agent job, compute_mode external, no ring; global batch --batch; the
   consumer turns each batch into a float tensor and reports) vs reading the
   same samples from the local RocksDB cache in-process (bench/cache_bench's
   MultiGet(64) through the record layer: CRC checked,
   payload copied out; random ids = the agent's access pattern, sequential =
   the best case). Target: loft >= 70% of in-process.
2. All-reduce. The round time of the external gradient exchange (4 agents,
   training.model external, trainers that all-reduce a 235,146-float gradient
   with loft.torch.allreduce_gradients and do no compute) vs the agents' own
   trainer (training.model mlp: 235,146 parameters), same spec otherwise:
   median of the agents' "all-reduce X ms" debug lines (exchange + ring),
   and the trainer-side wall time of allreduce_gradients (IPC both ways
   included). Target: external <= 1.3x own.

usage: torch_consumer_bench.py [--build build] [--batch 8192] [--iterations 40]
       [--rounds 200] [--out DIR]   (run with Debian's /usr/bin/python3: python3-torch)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)

SPEC = """dataset: {{name: fashion-mnist, samples: {samples}, sample_bytes: 784}}
placement: {{kind: shards, replication: 1}}
training: {{global_batch: {batch}, min_batch: 8, iterations: {iterations}, overlap: true, seed: 7, model: {model}, aggregation: mean}}
nodes:
  - name: edge
    count: {nodes}
    compute: {{fixed_ms: 1.0, per_sample_ms: 0.001, jitter: 0.0}}
    disk: {{read_mbps: 2000}}
    link: {{up_mbps: 10000, down_mbps: 10000, latency_ms: 0}}
"""

DATA_TRAINER = """
import os, sys, time, json, torch
from loft.torch import LoftBatches
n = 0; t_first = None; t_last = None
for x, y, b in LoftBatches(os.environ["LOFT_CONSUMER_ENDPOINT"], transform=lambda x, y: (x.float(), y), timeout_ms=8000):
    t = time.perf_counter()
    if t_first is None: t_first = t; first = len(y)
    else: n += len(y)
    t_last = t
print(json.dumps({"samples": n, "seconds": (t_last - t_first) if t_first else 0}))
"""

RING_TRAINER = """
import os, sys, time, json, torch
from loft.torch import LoftBatches, allreduce_gradients
P = 235146
m = torch.nn.Module(); m.w = torch.nn.Parameter(torch.zeros(P))
ms = []
for x, y, b in LoftBatches(os.environ["LOFT_CONSUMER_ENDPOINT"], timeout_ms=8000):
    m.w.grad = torch.full((P,), 1e-3)
    t = time.perf_counter()
    allreduce_gradients(m, b)
    ms.append((time.perf_counter() - t) * 1000)
    if b.round >= int(os.environ["LOFT_ITERATIONS"]) - 1:
        b.report(0.0); break
ms = sorted(ms[10:]) or [0]
print(json.dumps({"median_ms": ms[len(ms) // 2], "rounds": len(ms)}))
"""


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def cluster(build, out, spec_text, trainer=None, extra=()):
    os.makedirs(out, exist_ok=True)
    spec = os.path.join(out, "spec.yaml")
    with open(spec, "w") as f:
        f.write(spec_text)
    cmd = [os.path.join(build, "bin", "loftctl"), "cluster", "run", spec, "--out", os.path.join(out, "run"),
           "--insecure", "--daemon-log-level", "debug", "--eval-every", "0", *extra]
    if trainer:
        cmd += ["--trainer", trainer]
    env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""), OMP_NUM_THREADS="1")
    t0 = time.time()
    r = run(cmd, env=env, timeout=1200)
    return r, time.time() - t0, os.path.join(out, "run")


def agent_allreduce_ms(rundir):
    vals = []
    for f in os.listdir(os.path.join(rundir, "logs")):
        if not f.startswith("agent-"):
            continue
        with open(os.path.join(rundir, "logs", f)) as fh:
            for line in fh:
                m = re.search(r"all-reduce ([0-9.]+) ms", line)
                if m:
                    vals.append(float(m.group(1)))
    vals = sorted(vals[len(vals) // 10:])  # skip the warm-up rounds
    return statistics.median(vals) if vals else None, len(vals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="torch-bench-")
    os.makedirs(out, exist_ok=True)
    res = {"load_avg_1m": os.getloadavg()[0]}

    # 1. Data path: loft (1 agent, external, no ring) vs in-process RocksDB.
    tfile = os.path.join(out, "data_trainer.py")
    with open(tfile, "w") as f:
        f.write(DATA_TRAINER)
    spec = SPEC.format(samples=60000, batch=args.batch, iterations=args.iterations, model="none", nodes=1)
    r, dt, rundir = cluster(args.build, os.path.join(out, "data"), spec,
                            trainer=f"python3 {tfile}")
    last = [l for l in r.stderr.splitlines() if l.startswith("trainer ")][-1]
    d = json.loads(last.split(": ", 1)[1])
    loft_sps = d["samples"] / d["seconds"] if d["seconds"] > 0 else 0
    cb = run([os.path.join(args.build, "bin", "cache_bench"), "--rounds", "3"], timeout=600)
    cbj = json.loads(cb.stdout)
    # The agent reads a partition's ids in the epoch's shuffled order: random MultiGet(64) is the
    # same access pattern; sequential ids are the in-process best case.
    local = cbj["multiget64_random_samples_per_s"]
    local_seq = cbj["multiget64_sequential_samples_per_s"]
    res["data"] = {"loft_samples_per_s": round(loft_sps), "batch": args.batch, "iterations": args.iterations,
                   "local_rocksdb_random_samples_per_s": round(local),
                   "local_rocksdb_sequential_samples_per_s": round(local_seq),
                   "ratio": round(loft_sps / local, 3), "ratio_vs_sequential": round(loft_sps / local_seq, 3),
                   "target_ratio": 0.7, "loft_run_s": round(dt, 1)}

    # 2. All-reduce: external exchange vs the agents' own trainer (mlp, 235,146 params).
    tfile = os.path.join(out, "ring_trainer.py")
    with open(tfile, "w") as f:
        f.write(RING_TRAINER)
    spec = SPEC.format(samples=12000, batch=256, iterations=args.rounds, model="external", nodes=4)
    r, dt_ext, rundir = cluster(args.build, os.path.join(out, "external"), spec, trainer=f"python3 {tfile}")
    ext_ms, ext_n = agent_allreduce_ms(rundir)
    trainer_ms = [json.loads(l.split(": ", 1)[1])["median_ms"] for l in r.stderr.splitlines()
                  if l.startswith("trainer ") and "median_ms" in l]
    spec = SPEC.format(samples=12000, batch=256, iterations=args.rounds, model="mlp", nodes=4)
    r, dt_own, rundir = cluster(args.build, os.path.join(out, "own"), spec)
    own_ms, own_n = agent_allreduce_ms(rundir)
    res["allreduce"] = {"params": 235146, "members": 4, "rounds": args.rounds,
                        "external_agent_ms_median": ext_ms, "external_samples": ext_n,
                        "external_trainer_call_ms_median": statistics.median(trainer_ms) if trainer_ms else None,
                        "own_trainer_ms_median": own_ms, "own_samples": own_n,
                        "ratio_agent": round(ext_ms / own_ms, 3) if ext_ms and own_ms else None,
                        "ratio_trainer_call": round(statistics.median(trainer_ms) / own_ms, 3)
                        if trainer_ms and own_ms else None,
                        "target_ratio": 1.3, "external_run_s": round(dt_ext, 1), "own_run_s": round(dt_own, 1)}
    res["load_avg_1m_end"] = os.getloadavg()[0]
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
