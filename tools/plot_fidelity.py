#!/usr/bin/python3
"""Plot bench/fidelity.py results: predicted vs real mean iteration.

  tools/plot_fidelity.py RESULT.json [RESULT.json ...] --out docs/img/fidelity.png [--title TEXT]

One point per scenario x policy of every RESULT.json (the JSON that
bench/fidelity.py prints), log-log, with the y = x line and the ±10 %
band; the marker tells the policy, the colour the scenario, hollow
markers the calibration runs (not held out). Also prints the table of
the points as Markdown (what the README shows).
Needs python3-matplotlib (Debian); uses the Agg backend (no display).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = {"loft": "o", "lbbsp": "s", "uniform": "^", "loft-epoch": "D", "pid": "v"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="loft-sim prediction vs real run (mean iteration)")
    a = ap.parse_args()
    points = []
    for path in a.results:
        try:
            doc = json.load(open(path))
        except (OSError, ValueError) as e:
            sys.exit(f"plot_fidelity: cannot read {path}: {e}")
        mode = "synthetic" if str(doc.get("mode", "")).startswith("synthetic") else "training"
        for sc, s in doc.get("scenarios", {}).items():
            for p, r in s["policies"].items():
                points.append((f"{sc} ({mode})", p, r["real_mean_iteration_ms"], r["predicted_mean_iteration_ms"],
                               r["rel_error_mean_iteration"], r.get("held_out", True)))
    if not points:
        sys.exit("plot_fidelity: no scenario in the results")
    scenarios = sorted({p[0] for p in points})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(7, 6))
    lo = min(min(p[2], p[3]) for p in points) / 1.5
    hi = max(max(p[2], p[3]) for p in points) * 1.5
    ax.plot([lo, hi], [lo, hi], "k-", lw=1, label="y = x")
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.85", label="±10 %")
    for sc, p, real, pred, _, held in points:
        c = colours[scenarios.index(sc) % len(colours)]
        ax.scatter([real], [pred], marker=MARKERS.get(p, "x"), s=50,
                   facecolors=c if held else "none", edgecolors=c)
    for k, sc in enumerate(scenarios):
        ax.scatter([], [], color=colours[k % len(colours)], marker="o", label=sc)
    for p, m in MARKERS.items():
        if any(pt[1] == p for pt in points):
            ax.scatter([], [], color="0.3", marker=m, label=p)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("real mean iteration (ms)")
    ax.set_ylabel("predicted mean iteration (ms)")
    ax.set_title(a.title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("| scenario | policy | real ms | predicted ms | rel. error |")
    print("|---|---|---|---|---|")
    for sc, p, real, pred, err, held in points:
        print(f"| {sc} | {p}{'' if held else ' (calibration)'} | {real:.1f} | {pred:.1f} | {err:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
