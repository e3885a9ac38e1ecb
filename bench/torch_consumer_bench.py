#!/usr/bin/env python3
"""torch_consumer_bench: PyTorch through loft, two figures, one JSON object on stdout.

1. Data path. samples/s delivered into torch tensors by loft.torch.LoftBatches
   (a 1-agent job, compute_mode external, no ring; global batch --batch;
   each batch decoded as x = payloads.float() (N x 784), y = int64 labels)
   vs reading the SAME samples in-process: the consumer records every
   batch's sample ids; after the job the bench opens the agent's RocksDB
   cache in this process (bench/cache_reader_shim.cc via ctypes: one
   MultiGet per batch, each record's header + CRC32C + id verified as the
   agent does, the payload copied once straight into a fresh uint8 tensor,
   labels from the record header) and decodes every batch into the same
   tensors with the same transform, once serially and once with a reader
   thread that reads the next batch while this one is decoded (ctypes
   drops the GIL; loft's agent also reads ahead); in-process samples/s is
   the faster of the two. Both sides warm: loft's first batch is
   not timed (the agent has read the cache before), and the in-process
   side reads every batch once untimed first. Timed: from the first to the
   last batch in hand (loft: arrivals at the loop body; in-process: the
   loop over the same batches). --trials pairs, loft then in-process,
   back to back; ratio = median of the per-trial ratios. Target >= 0.70.
   Also per CPU second (cpu_ratio; loft: the trainer, agent and scheduler
   processes' user+system time over the same window): the figure that does
   not depend on how many cores the other tenants of the machine leave.
2. All-reduce. The round time of the external gradient exchange (4 agents,
   training.model external, trainers that all-reduce a 235,146-float gradient
   with loft.torch.allreduce_gradients and do no compute) vs the agents' own
   trainer (training.model mlp: 235,146 parameters), same spec otherwise:
   median of the agents' "all-reduce X ms" debug lines (exchange + ring),
   and the trainer-side wall time of allreduce_gradients (IPC both ways
   included). Target: external <= 1.3x own.

usage: torch_consumer_bench.py [--build build] [--batch 8192] [--iterations N]
       [--trials 3] [--rounds 200] [--skip-allreduce] [--out DIR]
       (run with Debian's /usr/bin/python3: python3-torch; --iterations
       default: 4 epochs of the 60,000 samples, at least 40)
"""
import argparse
import concurrent.futures
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
# CPU seconds of this trainer and of the job's agent and scheduler (the
# processes whose command line names the run directory), read per batch.
run = os.environ["LOFT_BENCH_RUNDIR"]
pids = [os.getpid()]
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if run in cmd and ("loft-agent" in cmd or "loft-scheduler" in cmd):
            pids.append(int(p))
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    s = 0.0
    for p in pids:
        try:
            f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            s += (int(f[11]) + int(f[12])) / tick
        except OSError:
            pass
    return s
n = 0; t_first = None; t_last = None; ids = []; c_first = c_last = 0.0
for x, y, b in LoftBatches(os.environ["LOFT_CONSUMER_ENDPOINT"], transform=lambda x, y: (x.float(), y), timeout_ms=8000):
    t = time.perf_counter()
    c = cpu()
    if t_first is None: t_first = t; c_first = c
    else: n += len(y)
    t_last = t; c_last = c
    ids.append(bytes(b.sample_ids_array()))  # for the in-process side (one memcpy per batch)
with open(os.environ["LOFT_BENCH_IDS"], "wb") as f:
    for chunk in ids:
        f.write(len(chunk).to_bytes(8, "little")); f.write(chunk)
print(json.dumps({"samples": n, "seconds": (t_last - t_first) if t_first else 0, "batches": len(ids),
                  "cpu_s": c_last - c_first, "processes": len(pids)}))
"""


def read_ids(path):
    """The batches' sample ids the data trainer recorded, one uint64 tensor per batch."""
    import torch
    out = []
    with open(path, "rb") as f:
        while True:
            head = f.read(8)
            if not head:
                return out
            chunk = f.read(int.from_bytes(head, "little"))
            out.append(torch.frombuffer(bytearray(chunk), dtype=torch.int64))


def in_process(build, cache_dir, batches, payload_size=784):
    """samples/s reading `batches` (id tensors) from the RocksDB cache at
    cache_dir in this process into the same tensors as the loft side: x =
    uint8 (n, payload_size) -> float, y = int64 labels. One untimed warm
    pass, then the timed pass over every batch but the first (as loft's)."""
    import ctypes
    import torch
    torch.set_num_threads(1)  # as the trainer (OMP_NUM_THREADS=1)
    lib = ctypes.CDLL(os.path.join(build, "lib", "libloft_bench_cache_reader.so"))
    lib.lbcr_open.restype = ctypes.c_void_p
    lib.lbcr_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.lbcr_read.restype = ctypes.c_int
    lib.lbcr_read.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.lbcr_close.argtypes = [ctypes.c_void_p]
    err = ctypes.create_string_buffer(512)
    h = lib.lbcr_open(cache_dir.encode(), err, len(err))
    if not h:
        sys.exit(f"in-process baseline: opening {cache_dir}: {err.value.decode()}")

    def read(ids):
        n = len(ids)
        x = torch.empty((n, payload_size), dtype=torch.uint8)
        lab = torch.empty(n, dtype=torch.int32)
        # ctypes releases the GIL during the call: a reader thread overlaps the decoding.
        if lib.lbcr_read(h, ids.data_ptr(), n, x.data_ptr(), payload_size, lab.data_ptr(), err, len(err)) != 0:
            sys.exit(f"in-process baseline: {err.value.decode()}")
        return x, lab

    def decode(x, lab):
        return x.float(), lab.to(torch.int64)

    def timed(prefetch):
        n = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        if prefetch:  # the next batch is read on a thread while this one is decoded
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                fut = pool.submit(read, batches[1])
                for k in range(1, len(batches)):
                    x, lab = fut.result()
                    if k + 1 < len(batches):
                        fut = pool.submit(read, batches[k + 1])
                    x, y = decode(x, lab)
                    n += len(y)
        else:
            for ids in batches[1:]:
                x, y = decode(*read(ids))
                n += len(y)
        return n, time.perf_counter() - t0, time.process_time() - c0

    try:
        for ids in batches:  # warm: block cache and page cache, as the agent's
            decode(*read(ids))
        n, dt, cpu = timed(prefetch=False)
        n2, dt2, _ = timed(prefetch=True)
        assert n2 == n
    finally:
        lib.lbcr_close(h)
    # The faster of the two in-process readers (samples/s); CPU from the serial one.
    return n / min(dt, dt2) if min(dt, dt2) > 0 else 0.0, n, cpu, (n / dt if dt > 0 else 0.0), (n / dt2 if dt2 > 0 else 0.0)



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


def cluster(build, out, spec_text, trainer=None, extra=(), env_extra=None):
    os.makedirs(out, exist_ok=True)
    spec = os.path.join(out, "spec.yaml")
    with open(spec, "w") as f:
        f.write(spec_text)
    cmd = [os.path.join(build, "bin", "loftctl"), "cluster", "run", spec, "--out", os.path.join(out, "run"),
           "--insecure", "--daemon-log-level", "debug", "--eval-every", "0", *extra]
    if trainer:
        cmd += ["--trainer", trainer]
    env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""), OMP_NUM_THREADS="1", **(env_extra or {}))
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
    ap.add_argument("--iterations", type=int, default=0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--skip-allreduce", action="store_true")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="torch-bench-")
    os.makedirs(out, exist_ok=True)
    res = {"load_avg_1m": os.getloadavg()[0]}

    # 1. Data path: loft (1 agent, external, no ring) vs the same samples in-process.
    tfile = os.path.join(out, "data_trainer.py")
    with open(tfile, "w") as f:
        f.write(DATA_TRAINER)
    iterations = args.iterations or max(40, (4 * 60000) // args.batch)
    trials = []
    for trial in range(args.trials):
        tdir = os.path.join(out, f"data-{trial}")
        ids_path = os.path.join(tdir, "ids.bin")
        os.makedirs(tdir, exist_ok=True)
        spec = SPEC.format(samples=60000, batch=args.batch, iterations=iterations, model="none", nodes=1)
        r, dt, rundir = cluster(args.build, tdir, spec, trainer=f"python3 {tfile}",
                                env_extra={"LOFT_BENCH_IDS": ids_path,
                                           "LOFT_BENCH_RUNDIR": os.path.join(tdir, "run")})
        last = [l for l in r.stderr.splitlines() if l.startswith("trainer ")][-1]
        d = json.loads(last.split(": ", 1)[1])
        loft_sps = d["samples"] / d["seconds"] if d["seconds"] > 0 else 0
        batches = read_ids(ids_path)
        local_sps, local_n, local_cpu, serial_sps, prefetch_sps = in_process(args.build, os.path.join(rundir, "caches", "edge"), batches)
        if local_n != d["samples"]:
            sys.exit(f"trial {trial}: in-process read {local_n} samples, loft delivered {d['samples']}")
        trials.append({"loft_samples_per_s": round(loft_sps), "in_process_samples_per_s": round(local_sps),
                       "in_process_serial_samples_per_s": round(serial_sps),
                       "in_process_prefetch_samples_per_s": round(prefetch_sps),
                       "ratio": round(loft_sps / local_sps, 3) if local_sps else None,
                       # Load-independent: samples per CPU second (loft: trainer + agent + scheduler).
                       "loft_samples_per_cpu_s": round(d["samples"] / d["cpu_s"]) if d["cpu_s"] > 0 else None,
                       "in_process_samples_per_cpu_s": round(local_n / local_cpu) if local_cpu > 0 else None,
                       "cpu_ratio": round((d["samples"] / d["cpu_s"]) / (local_n / local_cpu), 3)
                       if d["cpu_s"] > 0 and local_cpu > 0 else None, "loft_processes": d["processes"],
                       "batches": d["batches"], "samples_timed": d["samples"], "loft_run_s": round(dt, 1),
                       "load_avg_1m": os.getloadavg()[0]})
    ratios = sorted(t["ratio"] for t in trials if t["ratio"] is not None)
    cpu_ratios = sorted(t["cpu_ratio"] for t in trials if t["cpu_ratio"] is not None)
    res["data"] = {"batch": args.batch, "iterations": iterations, "trials": trials,
                   "ratio": ratios[len(ratios) // 2] if ratios else None, "target_ratio": 0.7,
                   "cpu_ratio": cpu_ratios[len(cpu_ratios) // 2] if cpu_ratios else None,
                   "in_process_includes": "one RocksDB MultiGet per batch (same ids, same order) on the agent's "
                                          "cache, header+CRC32C+id verified, payload copied once into a fresh "
                                          "uint8 tensor, labels from the header; then x.float(), y int64 (the "
                                          "loft side's transform); warm (one untimed pass); the faster of a "
                                          "serial loop and one with a reader thread one batch ahead; "
                                          "cpu_ratio uses the serial loop's CPU time"}
    if args.skip_allreduce:
        res["load_avg_1m_end"] = os.getloadavg()[0]
        print(json.dumps(res, indent=2))
        return

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
