#!/usr/bin/env python3
"""Prints real cluster runs next to the simulator's prediction.

Usage:
  compare_runs.py REAL_DIR SIM_DIR   per policy and per worker, the mean of
      every iterations.csv column in the real run (`loftctl cluster run
      --out REAL_DIR`) next to the simulator's (`loft-sim run --out
      SIM_DIR`), then the summary.json figures of both. Both engines write
      the same iterations.csv header (scheduler/run_recorder.h).
  compare_runs.py OUT_DIR [--calibrated-on POLICY]
      the main job's table (scripts/run-example.sh), one row per policy:
      the real run's summary.json (OUT_DIR/cluster-<policy>/) against two
      loft-sim predictions of its mean iteration:
        spec prior ms   loft-sim on the spec as written (OUT_DIR/sim/), the
                        spec's cost priors: no real model, no shared cores;
        calibrated ms   loft-sim on the spec `loftctl calibrate` fitted to
                        POLICY's real run (OUT_DIR/sim-calibrated/); that
                        row is marked "(fit)", the others are held out.
      real/prior and real/cal are the real mean over the predicted one. A
      last line says for how many held-out policies real/cal is within
      1 +- 0.10 and names the worst. Without OUT_DIR/sim-calibrated/ the
      calibrated columns read "-"; with it, --calibrated-on is required.
Exit status 1 when a directory lacks its files or the two share no policy,
2 on bad arguments.
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
    """value in the format spec; a missing value is "-", as wide as spec says."""
    if value is not None:
        return format(value, spec)
    width = spec.split(".")[0].rstrip("dfs")
    return format("-", ">" + width) if width.isdigit() else "-"


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


# Held-out predictions whose real / calibrated lies outside 1 +- this are
# flagged in the main job's last line (docs/fidelity.md: the target's form).
HELD_OUT_TOLERANCE = 0.10


def sim_policies(path):
    """(summary, {policy: figures}) of a loft-sim summary.json; ({}, None) when absent."""
    summary = load(path)
    return (summary or {}), (None if summary is None else summary.get("policies", {}))


def ratio(real, predicted):
    return real / predicted if real is not None and predicted else None


def compare_example(out, calibrated_on=None):
    sim, prior = sim_policies(out / "sim" / "summary.json")
    cal_path = out / "sim-calibrated" / "summary.json"
    _, cal = sim_policies(cal_path)
    if cal is not None and calibrated_on is None:
        print(f"compare_runs: {cal_path} exists: name the policy it was calibrated on (--calibrated-on)",
              file=sys.stderr)
        return 2
    if calibrated_on is not None and cal is None:
        print(f"compare_runs: --calibrated-on {calibrated_on}: no {cal_path}", file=sys.stderr)
        return 1
    prior = prior or {}
    header = (f"{'policy':<14} {'real mean ms':>12} {'real p95 ms':>11} {'real total s':>12} "
              f"{'spec prior ms':>13} {'real/prior':>10} {'calibrated ms':>13} {'real/cal':>8} "
              f"{'accuracy':>8} {'dup':>4} {'lost':>4}")
    rows = []
    for run in sorted(out.glob("cluster-*/summary.json")):
        summary = json.loads(run.read_text())
        ledger = summary.get("ledger", {})
        for name, p in summary.get("policies", {}).items():
            rows.append((name != calibrated_on, name, p, ledger))
    if not rows:
        print(f"no cluster-*/summary.json under {out}", file=sys.stderr)
        return 1
    if calibrated_on is not None and calibrated_on not in [r[1] for r in rows]:
        print(f"compare_runs: --calibrated-on {calibrated_on}: no real run of that policy under {out}",
              file=sys.stderr)
        return 1
    print(header)
    print("-" * len(header))
    held_out = []
    for held, name, p, ledger in sorted(rows):  # the calibration policy first
        real = p.get("mean_iteration_ms")
        pr = prior.get(name, {}).get("mean_iteration_ms")
        ca = (cal or {}).get(name, {}).get("mean_iteration_ms")
        label = name if held else f"{name} (fit)"
        print(f"{label:<14} {fmt(real, '12.2f')} {fmt(p.get('p95_iteration_ms'), '11.2f')} "
              f"{fmt(p.get('total_s'), '12.2f')} {fmt(pr, '13.2f')} {fmt(ratio(real, pr), '10.3f')} "
              f"{fmt(ca, '13.2f')} {fmt(ratio(real, ca), '8.3f')} {fmt(p.get('final_accuracy'), '8.4f')} "
              f"{fmt(ledger.get('duplicates'), '4d')} {fmt(ledger.get('lost'), '4d')}")
        if held and cal is not None:
            held_out.append((name, ratio(real, ca)))
    if sim.get("bound_mean_iteration_ms") is not None:
        print(f"lower bound on the mean iteration (planner model): {sim['bound_mean_iteration_ms']:.2f} ms")
    if cal is not None:
        print_held_out(calibrated_on, held_out)
    return 0


def print_held_out(calibrated_on, held_out):
    """The verdict on the held-out policies: real / calibrated within 1 +- HELD_OUT_TOLERANCE."""
    if not held_out:
        print(f"calibrated on {calibrated_on}: no held-out policy to predict")
        return
    missing = [n for n, r in held_out if r is None]
    known = [(n, r) for n, r in held_out if r is not None]
    within = [n for n, r in known if abs(r - 1) <= HELD_OUT_TOLERANCE]
    line = (f"calibrated on {calibrated_on}; held out: real/cal within 1 +- {HELD_OUT_TOLERANCE:.2f} for "
            f"{len(within)} of {len(held_out)}")
    if known:
        worst, r = max(known, key=lambda nr: abs(nr[1] - 1))
        line += f" (worst: {worst} {r:.3f})"
    if missing:
        line += f"; no calibrated prediction for {', '.join(missing)}"
    print(line)


def main():
    if len(sys.argv) == 3:
        return compare_dirs(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
    if len(sys.argv) == 2:
        return compare_example(pathlib.Path(sys.argv[1]))
    if len(sys.argv) == 4 and sys.argv[2] == "--calibrated-on":
        return compare_example(pathlib.Path(sys.argv[1]), sys.argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
