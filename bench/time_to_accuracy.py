#!/usr/bin/env python3
"""Time to a target test accuracy with real training across local agents.

For each policy x exchange configuration x seed: `loftctl cluster run SPEC
--policy P --iterations N --eval-every K` (real loft-scheduler +
loft-agents; with --testbed one network namespace and CPU cgroup per
agent, links shaped by tbf, as `loftctl cluster run --testbed`) on a copy
of SPEC whose `training.seed` and `training.exchange` are set (its
`placement.seed` pinned to the spec's, so every seed has the same data
placement and shares the caches), then reads
OUT/training.csv and reports the wall time (since the first plan) of the
first evaluation at or above the target. Prints one JSON document; every
number is measured in this run. Evaluations happen every K iterations
(with a longer exchange period, at the first exchange after each multiple
of K), so each time is a K-iteration-granular upper bound.

Per (policy, exchange): the median and range over seeds of the time to
target, the final accuracy and the accuracy at each evaluated iteration
(equal steps). --plot writes test accuracy against wall time (PNG).

  python3 bench/time_to_accuracy.py --bin build/bin \\
      [--spec examples/clusters/edge-bandwidth.yaml] [--policies loft,lbbsp,uniform] \\
      [--exchanges "1/none/false;auto/int8/true"] [--seeds 7,8,9] [--testbed] \\
      [--iterations 400] [--eval-every 20] [--target 0.85] [--plot out.png]

An exchange is period/compression/overlap[/drift] (training.exchange's
keys; drift is period: auto's c); "default" is 1/none/false.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml


def parse_exchange(text):
    if text == "default":
        text = "1/none/false"
    parts = text.split("/")
    if len(parts) not in (3, 4):
        raise SystemExit(f"--exchanges: '{text}' is not period/compression/overlap[/drift]")
    period, compression, overlap = parts[:3]
    ex = {"period": period if period == "auto" else int(period), "compression": compression,
          "overlap": overlap.lower() in ("true", "1", "yes")}
    name = f"{period}/{compression}/{'true' if ex['overlap'] else 'false'}"
    if len(parts) == 4:  # training.exchange.drift (period: auto's c)
        try:
            ex["drift"] = float(parts[3])
        except ValueError:
            raise SystemExit(f"--exchanges: drift '{parts[3]}' in '{text}' is not a number")
        name += f"/{parts[3]}"
    return name, ex


def spec_copy(src, dst, seed, exchange):
    with open(src) as f:
        spec = yaml.safe_load(f)
    spec.setdefault("training", {})
    # The data stays where the spec puts it: placement.seed defaults to
    # training.seed, so pin it to the spec's before varying the training
    # seed (every seed then trains on the same placement, and the caches
    # built for the first run serve them all).
    spec.setdefault("placement", {}).setdefault("seed", spec["training"].get("seed", 0))
    spec["training"]["seed"] = seed
    spec["training"]["exchange"] = exchange
    with open(dst, "w") as f:
        yaml.safe_dump(spec, f, sort_keys=False)


def run_one(a, spec, policy, out, caches):
    cmd = [os.path.join(a.bin, "loftctl"), "cluster", "run", spec, "--policy", policy, "--iterations",
           str(a.iterations), "--eval-every", str(a.eval_every), "--out", out, "--cache-root", caches,
           "--timeout-s", str(a.timeout_s)]
    if a.testbed:
        cmd.append("--testbed")
    else:
        cmd.append("--insecure")
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    entry = {"returncode": r.returncode, "command_wall_s": round(time.time() - t0, 1)}
    if r.returncode != 0:
        entry["error"] = r.stderr[-1500:]
        return entry
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    with open(os.path.join(out, "training.csv")) as f:
        rows = list(csv.DictReader(f))
    curve = [(int(x["iteration"]), float(x["wall_s"]), float(x["test_accuracy"]))
             for x in rows if x.get("test_accuracy")]
    hit = next((c for c in curve if c[2] >= a.target), None)
    ps = s["policies"][policy]
    entry.update({
        "final_accuracy": s.get("final_accuracy"),
        "time_to_target_s": hit[1] if hit else None,
        "iteration_at_target": hit[0] if hit else None,
        "mean_iteration_ms": ps.get("mean_iteration_ms"),
        "total_s": ps.get("total_s"),
        "hash_mismatches": s.get("training", {}).get("hash_mismatches"),
        "accuracy_curve": [{"iteration": i, "wall_s": w, "test_accuracy": acc} for i, w, acc in curve],
    })
    return entry


def med_range(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v),
            "missing": len(values) - len(v)}


def aggregate(runs):
    ok = [r for r in runs.values() if r.get("returncode") == 0]
    out = {"time_to_target_s": med_range([r.get("time_to_target_s") for r in ok]),
           "final_accuracy": med_range([r.get("final_accuracy") for r in ok]),
           "mean_iteration_ms": med_range([r.get("mean_iteration_ms") for r in ok])}
    # Accuracy at equal steps: every iteration evaluated in every seed's run.
    by_it = {}
    for r in ok:
        for c in r["accuracy_curve"]:
            by_it.setdefault(c["iteration"], []).append(c["test_accuracy"])
    out["accuracy_at_iteration"] = {str(i): statistics.median(v) for i, v in sorted(by_it.items())
                                    if len(v) == len(ok)}
    return out


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, cfg in result["configs"].items():
        for seed, r in cfg["runs"].items():
            if r.get("returncode") != 0:
                continue
            xs = [c["wall_s"] for c in r["accuracy_curve"]]
            ys = [c["test_accuracy"] for c in r["accuracy_curve"]]
            ax.plot(xs, ys, label=f"{key} seed {seed}", alpha=0.8)
    ax.axhline(result["target_accuracy"], color="grey", linestyle=":")
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("test accuracy")
    ax.set_title(os.path.basename(result["spec"]))
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="directory with loftctl, loft-scheduler, loft-agent")
    ap.add_argument("--spec", default=os.path.join(os.path.dirname(__file__), "../examples/clusters/edge-bandwidth.yaml"))
    ap.add_argument("--policies", default="loft,lbbsp,uniform")
    ap.add_argument("--exchanges", default="default", help="';'-separated period/compression/overlap")
    ap.add_argument("--seeds", default="", help="comma-separated training seeds (default: the spec's)")
    ap.add_argument("--testbed", action="store_true", help="run on the namespace/cgroup testbed (root)")
    ap.add_argument("--iterations", type=int, default=400)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--timeout-s", type=int, default=3600)
    ap.add_argument("--out", default="")
    ap.add_argument("--plot", default="", help="PNG of test accuracy against wall time")
    a = ap.parse_args()
    root = a.out or tempfile.mkdtemp(prefix="loft-tta-")
    os.makedirs(root, exist_ok=True)
    if not a.out:
        os.chmod(root, 0o755)  # --testbed's daemons run as nobody (docs/testbed.md "Privileges"); mkdtemp: 0700
    caches = os.path.join(root, "caches")
    with open(a.spec) as f:
        spec_seed = (yaml.safe_load(f).get("training") or {}).get("seed", 7)
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else [spec_seed]
    exchanges = [parse_exchange(x.strip()) for x in a.exchanges.split(";") if x.strip()]
    result = {"spec": os.path.abspath(a.spec), "iterations": a.iterations, "eval_every": a.eval_every,
              "target_accuracy": a.target, "testbed": a.testbed, "seeds": seeds, "configs": {}}
    for ex_name, ex in exchanges:
        for p in a.policies.split(","):
            key = f"{p} exchange={ex_name}"
            runs = {}
            for seed in seeds:
                tag = f"{p}-{ex_name.replace('/', '_')}-s{seed}"
                spec = os.path.join(root, f"{tag}.yaml")
                spec_copy(a.spec, spec, seed, ex)
                entry = run_one(a, spec, p, os.path.join(root, tag), caches)
                runs[str(seed)] = entry
                print(f"{key} seed {seed}: rc {entry['returncode']} final {entry.get('final_accuracy')} "
                      f"time-to-{a.target} {entry.get('time_to_target_s')} mean iteration "
                      f"{entry.get('mean_iteration_ms')} ms", file=sys.stderr)
            result["configs"][key] = {"policy": p, "exchange": ex, "runs": runs, "summary": aggregate(runs)}
    if a.plot:
        result["plot"] = os.path.abspath(a.plot)
    print(json.dumps(result, indent=2), flush=True)
    if a.plot:
        try:
            plot(result, a.plot)
        except ImportError as e:  # the JSON above stands; only the picture is missing
            raise SystemExit(f"--plot needs matplotlib (Debian's python3-matplotlib, /usr/bin/python3): {e}")


if __name__ == "__main__":
    main()
