"""`loftctl cluster run` on a 4-node, 4000-sample spec: a scheduler and 4
agents (CURVE on) complete 2 epochs; summary.json has the loft-sim fields
plus ledger duplicates = 0 and lost = 0. The spec has overlap: true, so
the scheduler plans ahead: iteration t+1 streams while t runs (plan_ahead
auto: deeper than 1, as the spec's default 5.9 ms hand-off exceeds these
iterations), and no agent ever has more partitions in flight than its
window (4 credits).
iterations.csv has the simulator's header with one row per worker per
iteration, filled from the agents' timings; its waits give summary.json's
straggler_wait_ms (a mean, not a sum); tools/compare_runs.py prints the
real and simulated per-worker columns side by side."""
import csv
import json
import os
import subprocess
import tempfile

import loft_it

tmp = tempfile.mkdtemp(prefix="loft-it-run-")
spec = os.path.join(tmp, "spec.yaml")
with open(spec, "w") as f:
    f.write(loft_it.SMALL_SPEC.format(samples=4000, replication=1, per_sample_ms=0.02))
out = os.path.join(tmp, "out")
r = subprocess.run([loft_it.exe("loftctl"), "cluster", "run", spec, "--policy", "loft", "--iterations", "32",
                    "--out", out, "--timeout-s", "100"], capture_output=True, text=True, timeout=115)
print(r.stderr[-3000:])
assert r.returncode == 0, f"cluster run failed ({r.returncode})"
with open(os.path.join(out, "summary.json")) as f:
    s = json.load(f)
p = s["policies"]["loft"]
for k in ["mean_iteration_ms", "p95_iteration_ms", "total_s", "straggler_wait_ms", "local_bytes", "remote_bytes"]:
    assert k in p, f"summary.json lacks policies.loft.{k}"
assert p["mean_iteration_ms"] > 0
assert p["local_bytes"] > 0
l = s["ledger"]
assert l["epochs_completed"] == 2, l
assert l["samples_committed"] == 8000, l
assert l["duplicates"] == 0 and l["lost"] == 0, l
with open(os.path.join(out, "status.json")) as f:
    st = json.load(f)
assert 1 <= st["plan_ahead"] <= 3, st["plan_ahead"]
# All but the first iteration of each epoch can go ahead; allow for a few
# that wait (e.g. a credit arriving late on a loaded machine).
assert st["planned_ahead"] >= 20, st["planned_ahead"]
for w in st["workers"]:
    assert 1 <= w["max_in_flight"] <= 4, w
    assert w["in_flight"] == 0, w
# iterations.csv: the simulator's header, one row per worker per iteration.
with open(os.path.join(out, "iterations.csv")) as f:
    real_header = f.readline().strip()
    f.seek(0)
    rows = list(csv.DictReader(f))
sim_out = os.path.join(tmp, "sim")
r = subprocess.run([loft_it.exe("loft-sim"), "run", spec, "--policy", "loft", "--iterations", "32", "--out", sim_out],
                   capture_output=True, text=True, timeout=60)
assert r.returncode == 0, r.stderr
with open(os.path.join(sim_out, "iterations.csv")) as f:
    sim_header = f.readline().strip()
assert real_header == sim_header, (real_header, sim_header)
assert len(rows) == 32 * 4, len(rows)
assert {r["worker"] for r in rows} == {f"edge-{k}" for k in range(4)}, {r["worker"] for r in rows}
assert all(float(r["compute_ms"]) > 0 for r in rows)
assert sum(int(r["local"]) + int(r["remote"]) for r in rows) == 8000
waits = [float(r["wait_ms"]) for r in rows]
assert abs(sum(waits) / len(waits) - p["straggler_wait_ms"]) < 1e-3 * max(1.0, p["straggler_wait_ms"]), \
    (sum(waits) / len(waits), p["straggler_wait_ms"])
cmp = subprocess.run(["python3", os.path.join(loft_it.SOURCE_DIR, "tools", "compare_runs.py"), out, sim_out],
                     capture_output=True, text=True, timeout=60)
assert cmp.returncode == 0, cmp.stderr
for k in range(4):
    assert f"edge-{k}" in cmp.stdout, cmp.stdout
print(cmp.stdout)
print("ok", json.dumps(s))
