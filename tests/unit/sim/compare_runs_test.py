"""tools/compare_runs.py REAL_DIR SIM_DIR: per policy and per worker, the
mean of each iterations.csv column in both runs, side by side. The real
run here is written by hand with known values; the simulated one by
loft-sim (same header, scheduler/run_recorder.h)."""
import os
import subprocess
import sys
import tempfile

src, loft_sim = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="loft-compare-")
spec = os.path.join(tmp, "spec.yaml")
with open(spec, "w") as f:
    f.write("dataset: {name: fashion-mnist, samples: 400, sample_bytes: 784}\n"
            "placement: {kind: shards, replication: 1}\n"
            "training: {global_batch: 40, min_batch: 4, iterations: 4, seed: 7}\n"
            "nodes:\n  - name: a\n    compute: {fixed_ms: 1.0, per_sample_ms: 0.1}\n"
            "  - name: b\n    compute: {fixed_ms: 1.0, per_sample_ms: 0.3}\n")
sim = os.path.join(tmp, "sim")
r = subprocess.run([loft_sim, "run", spec, "--policy", "loft", "--out", sim], capture_output=True, text=True)
assert r.returncode == 0, r.stderr
with open(os.path.join(sim, "iterations.csv")) as f:
    header = f.readline().strip()
cols = header.split(",")
real = os.path.join(tmp, "real")
os.makedirs(real)
with open(os.path.join(real, "iterations.csv"), "w") as f:
    f.write(header + "\n")
    # Worker a waits 10 then 30 ms (mean 20); b never waits; b's compute 7 and 9 (mean 8).
    for it, (wa, cb) in enumerate([(10, 7), (30, 9)]):
        for worker, wait, comp in [("a", wa, 3), ("b", 0, cb)]:
            row = {c: "0" for c in cols}
            row.update(policy="loft", iteration=str(it), epoch="0", worker=worker, wait_ms=str(wait),
                       compute_ms=str(comp), makespan_ms="40")
            f.write(",".join(row[c] for c in cols) + "\n")
r = subprocess.run([sys.executable, os.path.join(src, "tools", "compare_runs.py"), real, sim], capture_output=True,
                   text=True)
print(r.stdout, r.stderr)
assert r.returncode == 0, r.returncode
lines = r.stdout.splitlines()
assert lines[0] == "policy loft: per-worker means, real / sim", lines[0]
names = lines[1].split()
a = next(line for line in lines if line.startswith("a "))
b = next(line for line in lines if line.startswith("b "))
cells_a = a.split()[1:]
cells_b = b.split()[1:]
assert len(cells_a) == len(names) - 1, (names, cells_a)
wait = names.index("wait_ms") - 1
comp = names.index("compute_ms") - 1
assert cells_a[wait].startswith("20.00/"), cells_a[wait]
assert cells_b[wait].startswith("0.00/"), cells_b[wait]
assert cells_b[comp].startswith("8.00/"), cells_b[comp]
# The simulated side is loft-sim's own mean for that worker.
sim_b = [ln.split(",") for ln in open(os.path.join(sim, "iterations.csv")).read().splitlines()[1:]]
sim_b_comp = [float(x[cols.index("compute_ms")]) for x in sim_b if x[cols.index("worker")] == "b"]
assert cells_b[comp] == f"8.00/{sum(sim_b_comp) / len(sim_b_comp):.2f}", (cells_b[comp], sim_b_comp)
# No shared policy: a clear error.
r = subprocess.run([sys.executable, os.path.join(src, "tools", "compare_runs.py"), real, tmp], capture_output=True,
                   text=True)
assert r.returncode != 0
print("ok")
