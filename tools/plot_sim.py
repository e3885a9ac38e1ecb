#!/usr/bin/python3
"""Plot a loft-sim run (DIR/iterations.csv, written by `loft-sim run`).

  tools/plot_sim.py DIR [--policy loft] [--out PNG] [--title TEXT]

Writes one PNG (default DIR/sim.png) with two panels:
  left:  iteration time (BSP makespan, ms) per policy over the run;
  right: per-worker time breakdown for one policy (mean over its
         iterations): read, compute and wait stacked. With overlap, read
         and compute run concurrently, so the bar shows the worker's own
         time split as read-only / compute-only / both.
When iterations.csv has an `epoch` column, also writes DIR/epoch.png (or
--epoch-out): iteration time against the position within the epoch, mean
over the run's epochs, for loft vs loft-epoch (every policy when neither
is present) — the end-of-epoch cliff of greedy planning.
Needs python3-matplotlib (Debian); uses the Agg backend (no display).
"""
import argparse
import csv
import os
import sys
from collections import OrderedDict, defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REQUIRED = ["policy", "iteration", "worker", "fetch_local_ms", "fetch_remote_ms", "compute_ms", "wait_ms",
            "makespan_ms"]


def load(path):
    try:
        f = open(path, newline="")
    except OSError as e:
        sys.exit(f"plot_sim: cannot open {path}: {e.strerror}")
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            sys.exit(f"plot_sim: {path}: missing column(s) {', '.join(missing)}")
        rows = list(reader)
    if not rows:
        sys.exit(f"plot_sim: {path}: no rows")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="loft-sim output directory (holds iterations.csv)")
    ap.add_argument("--policy", default=None, help="policy for the per-worker breakdown (default: loft, else the first)")
    ap.add_argument("--out", default=None, help="PNG path (default DIR/sim.png)")
    ap.add_argument("--title", default=None)
    ap.add_argument("--max-workers", type=int, default=64, help="breakdown shows at most this many workers")
    ap.add_argument("--epoch-out", default=None, help="epoch-profile PNG path (default DIR/epoch.png)")
    args = ap.parse_args()

    rows = load(os.path.join(args.dir, "iterations.csv"))
    makespan = OrderedDict()  # policy -> {iteration: ms}
    for r in rows:
        makespan.setdefault(r["policy"], {})[int(r["iteration"])] = float(r["makespan_ms"])
    policies = list(makespan)
    policy = args.policy or ("loft" if "loft" in makespan else policies[0])
    if policy not in makespan:
        sys.exit(f"plot_sim: policy {policy!r} not in {', '.join(policies)}")

    sums = OrderedDict()  # worker -> [read_only, both, compute_only, wait, n]
    for r in rows:
        if r["policy"] != policy:
            continue
        # Local and remote reads run concurrently.
        read = max(float(r["fetch_local_ms"]), float(r["fetch_remote_ms"]))
        comp, wait = float(r["compute_ms"]), float(r["wait_ms"])
        own = float(r["own_ms"]) if "own_ms" in r and r["own_ms"] else read + comp
        both = max(0.0, read + comp - own)  # overlapped part
        s = sums.setdefault(r["worker"], [0.0, 0.0, 0.0, 0.0, 0])
        s[0] += read - both
        s[1] += both
        s[2] += comp - both
        s[3] += wait
        s[4] += 1
    workers = list(sums)[: args.max_workers]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    for p in policies:
        its = sorted(makespan[p])
        ax1.plot(its, [makespan[p][i] for i in its], label=p, linewidth=1)
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("iteration time (ms)")
    ax1.set_title("iteration time per policy")
    ax1.set_ylim(bottom=0)
    ax1.legend()
    ax1.grid(alpha=0.3)

    x = range(len(workers))
    parts = [("read only", 0, "#4c72b0"), ("read + compute", 1, "#8172b2"), ("compute only", 2, "#55a868"),
             ("wait", 3, "#c44e52")]
    bottom = [0.0] * len(workers)
    for label, k, color in parts:
        vals = [sums[w][k] / sums[w][4] for w in workers]
        if any(v > 0 for v in vals):
            ax2.bar(x, vals, bottom=bottom, label=label, color=color)
            bottom = [b + v for b, v in zip(bottom, vals)]
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(workers, rotation=60, ha="right", fontsize=7 if len(workers) > 12 else 9)
    ax2.set_ylabel("mean time per iteration (ms)")
    ax2.set_title(f"per-worker breakdown ({policy})")
    ax2.legend()
    ax2.grid(axis="y", alpha=0.3)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    out = args.out or os.path.join(args.dir, "sim.png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    if "epoch" in rows[0]:
        plot_epoch_profile(rows, args.epoch_out or os.path.join(args.dir, "epoch.png"), args.title)


def plot_epoch_profile(rows, out, title):
    """Mean iteration time at each position within an epoch, per policy."""
    per = OrderedDict()  # policy -> epoch -> {iteration: ms}
    for r in rows:
        per.setdefault(r["policy"], defaultdict(dict))[int(r["epoch"])][int(r["iteration"])] = float(r["makespan_ms"])
    chosen = [p for p in ("loft", "loft-epoch") if p in per] or list(per)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for p in chosen:
        epochs = per[p]
        # Only full-length epochs (the longest ones) when the run ends mid-epoch.
        longest = max(len(v) for v in epochs.values())
        full = [v for v in epochs.values() if len(v) >= longest - 1] or list(epochs.values())
        n = min(len(v) for v in full)
        mean = [0.0] * n
        for v in full:
            its = sorted(v)[:n]
            for k, i in enumerate(its):
                mean[k] += v[i] / len(full)
        ax.plot(range(n), mean, label=f"{p} ({len(full)} epochs)", linewidth=1.2)
    ax.set_xlabel("iteration within the epoch")
    ax.set_ylabel("iteration time (ms), mean over epochs")
    ax.set_title(title or "iteration time across an epoch")
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
