#!/usr/bin/env python3
"""Time to a target test accuracy with real training across local agents.

For each policy: `loftctl cluster run SPEC --policy P --iterations N
--eval-every K` (real loft-scheduler + loft-agents, link emulation on),
then reads OUT/training.csv and reports the wall time (since the first
plan) of the first evaluation at or above the target. Prints one JSON
document; every number is measured in this run. Evaluations happen every
K iterations, so the time is a K-iteration-granular upper bound.

  python3 bench/time_to_accuracy.py --bin build-<you>/bin \
      [--spec examples/clusters/edge-bandwidth.yaml] [--policies loft,lbbsp,uniform] \
      [--iterations 400] [--eval-every 20] [--target 0.85]
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with loftctl, loft-scheduler, loft-agent")
    ap.add_argument("--spec", default=os.path.join(os.path.dirname(__file__), "../examples/clusters/edge-bandwidth.yaml"))
    ap.add_argument("--policies", default="loft,lbbsp,uniform")
    ap.add_argument("--iterations", type=int, default=400)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--timeout-s", type=int, default=1800)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    root = a.out or tempfile.mkdtemp(prefix="loft-tta-")
    caches = os.path.join(root, "caches")
    result = {"spec": os.path.abspath(a.spec), "iterations": a.iterations, "eval_every": a.eval_every,
              "target_accuracy": a.target, "policies": {}}
    for p in a.policies.split(","):
        out = os.path.join(root, p)
        cmd = [os.path.join(a.bin, "loftctl"), "cluster", "run", a.spec, "--policy", p, "--iterations",
               str(a.iterations), "--eval-every", str(a.eval_every), "--out", out, "--cache-root", caches,
               "--insecure", "--timeout-s", str(a.timeout_s)]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.time() - t0
        entry = {"returncode": r.returncode, "command_wall_s": round(wall, 1)}
        if r.returncode != 0:
            entry["error"] = r.stderr[-1500:]
            result["policies"][p] = entry
            print(f"{p}: failed", file=sys.stderr)
            continue
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        with open(os.path.join(out, "training.csv")) as f:
            rows = list(csv.DictReader(f))
        curve = [(int(x["iteration"]), float(x["wall_s"]), float(x["test_accuracy"]))
                 for x in rows if x.get("test_accuracy")]
        hit = next((c for c in curve if c[2] >= a.target), None)
        ps = s["policies"][p]
        entry.update({
            "final_accuracy": s.get("final_accuracy"),
            "time_to_target_s": hit[1] if hit else None,
            "iteration_at_target": hit[0] if hit else None,
            "mean_iteration_ms": ps.get("mean_iteration_ms"),
            "total_s": ps.get("total_s"),
            "hash_mismatches": s.get("training", {}).get("hash_mismatches"),
            "accuracy_curve": [{"iteration": i, "wall_s": w, "test_accuracy": acc} for i, w, acc in curve],
        })
        result["policies"][p] = entry
        print(f"{p}: final {entry['final_accuracy']} time-to-{a.target} {entry['time_to_target_s']}",
              file=sys.stderr)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
