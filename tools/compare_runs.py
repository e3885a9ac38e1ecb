#!/usr/bin/env python3
"""Prints real cluster runs next to the simulator's prediction.

Usage:
  compare_runs.py REAL_DIR SIM_DIR   per policy and per worker, the mean of
      every iterations.csv column in the real run (`loftctl cluster run
      --out REAL_DIR`) next to the simulator's (`loft-sim run --out
      SIM_DIR`), then the summary.json figures of both. Both engines write
      the same iterations.csv header (scheduler/run_recorder.h).
  compare_runs.py OUT_DIR            one row per policy: OUT_DIR/cluster-<policy>/
      summary.json against OUT_DIR/sim/summary.json (scripts/run-example.sh).
Exit status 1 when a directory lacks its files or the two share no policy.
"""
import csv
import json
import pathlib
import sys

# Columns averaged per worker (iterations.csv, filled by the same rules in
# both engines; the simulator writes 0 for the scheduler's own CPU time,
# plan_ms and journal_ms, and for allreduce_ms unless the spec has a
# model). OPTIONAL columns read as 0 when a file predates them.
COLUMNS = ["batch", "local", "remote", "fetch_local_ms", "fetch_remote_ms", "compute_ms", "wait_ms",
           "makespan_ms", "own_ms", "plan_ms", "stream_ms", "ack_ms", "allreduce_ms", "journal_ms"]
OPTIONAL = {"journal_ms"}
FIGURES = ["mean_iteration_ms", "p95_iteration_ms", "last_decile_iteration_ms", "total_s", "straggler_wait_ms",
           "local_bytes", "remote_bytes"]


def load(path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def worker_means(path):
    """{policy: {worker: {column: mean}}} from an iterations.csv, workers in first-seen order."""
    try:
        f = open(path, newline="")
    except OSError as e:
        raise SystemExit(f"compare_runs: cannot open {path}: {e.strerror}")
    sums = {}
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in ["policy", "worker"] + COLUMNS
                   if c not in (reader.fieldnames or []) and c not in OPTIONAL]
        if missing:
            raise SystemExit(f"compare_runs: {path}: missing column(s) {', '.join(missing)}")
        for r in reader:
            w = sums.setdefault(r["policy"], {}).setdefault(r["worker"], {"n": 0})
            w["n"] += 1
            for c in COLUMNS:
                w[c] = w.get(c, 0.0) + float(r.get(c) or 0)
    return {p: {w: {c: v[c] / v["n"] for c in COLUMNS} for w, v in ws.items()} for p, ws in sums.items()}


def compare_dirs(real_dir, sim_dir):
    real = worker_means(real_dir / "iterations.csv")
    sim = worker_means(sim_dir / "iterations.csv")
    real_sum = (load(real_dir / "summary.json") or {}).get("policies", {})
    sim_sum = (load(sim_dir / "summary.json") or {}).get("policies", {})
    shared = [p for p in real if p in sim]
    if not shared:
        print(f"compare_runs: no policy in both {real_dir} ({', '.join(real) or 'none'}) and {sim_dir} "
              f"({', '.join(sim) or 'none'})", file=sys.stderr)
        return 1
    for p in shared:
        print(f"policy {p}: per-worker means, real / sim")
        print(f"{'worker':<16} " + " ".join(f"{c:>21}" for c in COLUMNS))
        for w in list(real[p]) + [w for w in sim[p] if w not in real[p]]:
            r, s = real[p].get(w), sim[p].get(w)
            cells = []
            for c in COLUMNS:
                cells.append(f"{fmt(r[c] if r else None, '.2f'):>10}/{fmt(s[c] if s else None, '.2f'):<10}")
            print(f"{w:<16} " + " ".join(cells))
        rp, sp = real_sum.get(p, {}), sim_sum.get(p, {})
        print(f"summary {p}: " + ", ".join(
            f"{k} {fmt(rp.get(k), '.2f')} / {fmt(sp.get(k), '.2f')}" for k in FIGURES))
        print()
    return 0


def compare_example(out):
    sim = load(out / "sim" / "summary.json") or {}
    sim_policies = sim.get("policies", {})
    header = (f"{'policy':<10} {'real mean ms':>12} {'real p95 ms':>11} {'real total s':>12} "
              f"{'sim mean ms':>11} {'accuracy':>8} {'dup':>4} {'lost':>4}")
    print(header)
    print("-" * len(header))
    rows = 0
    for run in sorted(out.glob("cluster-*/summary.json")):
        summary = json.loads(run.read_text())
        ledger = summary.get("ledger", {})
        for name, p in summary.get("policies", {}).items():
            s = sim_policies.get(name, {})
            print(f"{name:<10} {fmt(p.get('mean_iteration_ms'), '12.2f')} "
                  f"{fmt(p.get('p95_iteration_ms'), '11.2f')} {fmt(p.get('total_s'), '12.2f')} "
                  f"{fmt(s.get('mean_iteration_ms'), '11.2f')} {fmt(p.get('final_accuracy'), '8.4f')} "
                  f"{fmt(ledger.get('duplicates'), '4d')} {fmt(ledger.get('lost'), '4d')}")
            rows += 1
    if sim.get("bound_mean_iteration_ms") is not None:
        print(f"lower bound on the mean iteration (planner model): {sim['bound_mean_iteration_ms']:.2f} ms")
    if rows == 0:
        print(f"no cluster-*/summary.json under {out}", file=sys.stderr)
        return 1
    return 0


def main():
    if len(sys.argv) == 3:
        return compare_dirs(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
    if len(sys.argv) == 2:
        return compare_example(pathlib.Path(sys.argv[1]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
