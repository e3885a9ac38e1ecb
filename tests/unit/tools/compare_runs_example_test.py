"""tools/compare_runs.py OUT_DIR --calibrated-on POLICY: the main job's table
(scripts/run-example.sh) on hand-written run outputs with known figures.
Checks every column of every row, the "(fit)" mark, the held-out verdict
line, and the errors for a calibrated prediction without its policy and a
policy without a run."""
import json
import os
import re
import subprocess
import sys
import tempfile

src = sys.argv[1]
script = os.path.join(src, "tools", "compare_runs.py")


def write(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)


def run(*args):
    r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    print(r.stdout, r.stderr)
    return r


out = tempfile.mkdtemp(prefix="loft-compare-example-")
# Real runs: mean, p95, total, accuracy; the ledger's duplicates and lost.
real = {"loft": (200.0, 250.0, 72.0, 0.86, 0, 0), "lbbsp": (210.0, 260.0, 75.6, 0.85, 1, 0),
        "uniform": (240.0, 300.0, 86.4, 0.84, 0, 2)}
for name, (mean, p95, total, acc, dup, lost) in real.items():
    write(os.path.join(out, f"cluster-{name}", "summary.json"),
          {"policies": {name: {"mean_iteration_ms": mean, "p95_iteration_ms": p95, "total_s": total,
                               "final_accuracy": acc}},
           "ledger": {"duplicates": dup, "lost": lost}})
prior = {"loft": 100.0, "lbbsp": 120.0, "uniform": 150.0}
calibrated = {"loft": 190.0, "lbbsp": 200.0, "uniform": 200.0}
write(os.path.join(out, "sim", "summary.json"),
      {"policies": {p: {"mean_iteration_ms": v} for p, v in prior.items()}, "bound_mean_iteration_ms": 8.5})

# Without a calibrated prediction: the calibrated columns read "-", no verdict.
r = run(out)
assert r.returncode == 0, r.returncode
lines = r.stdout.splitlines()
header = lines[0]
columns = ["policy", "real mean ms", "real p95 ms", "real total s", "spec prior ms", "real/prior", "calibrated ms",
           "real/cal", "accuracy", "dup", "lost"]
at = [header.index(c) for c in columns]
assert at == sorted(at), f"columns out of order: {header}"
assert set(lines[1]) == {"-"}, lines[1]
rows = {ln[:14].strip(): ln[14:].split() for ln in lines[2:5]}
assert sorted(rows) == ["lbbsp", "loft", "uniform"], rows
for name, cells in rows.items():
    assert cells[5:7] == ["-", "-"], (name, cells)
assert not any(ln.startswith("calibrated on") for ln in lines), lines

# With it: the calibration policy first, marked "(fit)"; every figure in its column.
write(os.path.join(out, "sim-calibrated", "summary.json"),
      {"policies": {p: {"mean_iteration_ms": v} for p, v in calibrated.items()}})
r = run(out, "--calibrated-on", "loft")
assert r.returncode == 0, r.returncode
lines = r.stdout.splitlines()
assert lines[0] == header, (lines[0], header)
body = lines[2:5]
assert body[0].startswith("loft (fit) "), body[0]
assert body[1].startswith("lbbsp ") and body[2].startswith("uniform "), body
for ln in body:
    name = ln[:14].split()[0]
    cells = ln[14:].split()
    mean, p95, total, acc, dup, lost = real[name]
    want = [f"{mean:.2f}", f"{p95:.2f}", f"{total:.2f}", f"{prior[name]:.2f}", f"{mean / prior[name]:.3f}",
            f"{calibrated[name]:.2f}", f"{mean / calibrated[name]:.3f}", f"{acc:.4f}", str(dup), str(lost)]
    assert cells == want, (name, cells, want)
    # Each figure is right-aligned under its own column's header.
    ends = [header.index(c) + len(c) for c in columns[1:]]
    assert [m.end() for m in re.finditer(r"\S+", ln)][-len(ends):] == ends, (ln, header)
assert "lower bound on the mean iteration (planner model): 8.50 ms" in lines, lines
# lbbsp 210 / 200 = 1.050 is within 10 %, uniform 240 / 200 = 1.200 is not.
assert lines[-1] == "calibrated on loft; held out: real/cal within 1 +- 0.10 for 1 of 2 (worst: uniform 1.200)", \
    lines[-1]

# A calibrated prediction without the policy it was fitted to: exit 2, named.
r = run(out)
assert r.returncode == 2, r.returncode
assert "--calibrated-on" in r.stderr, r.stderr
# A calibration policy with no real run: exit 1, named.
r = run(out, "--calibrated-on", "pid")
assert r.returncode == 1 and "pid" in r.stderr, (r.returncode, r.stderr)
print("ok")
