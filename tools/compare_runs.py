#!/usr/bin/env python3
"""Prints real cluster runs next to the simulator's prediction.

Usage: compare_runs.py OUT_DIR
Reads OUT_DIR/cluster-<policy>/summary.json (from `loftctl cluster run`) and
OUT_DIR/sim/summary.json (from `loft-sim run`), both in the summary.json
format of docs/DESIGN.md, and prints one row per policy.
"""
import json
import pathlib
import sys


def load(path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(sys.argv[1])
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


if __name__ == "__main__":
    sys.exit(main())
