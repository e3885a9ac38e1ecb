"""`loftctl calibrate RUN_DIR --out SPEC`: after a real `cluster run`, the
calibrated spec loads, carries the scheduler's fitted compute constants
(status.json workers[].profile) and keeps what the run did not observe."""
import json
import os
import re
import subprocess
import tempfile

import loft_it

tmp = tempfile.mkdtemp(prefix="loft-it-cal-")
spec = os.path.join(tmp, "spec.yaml")
with open(spec, "w") as f:
    # The synthetic agents report the emulated node's compute time (the
    # spec's law times a jitter draw, edge_agent/trainer.h): with jitter the
    # fitted constants leave the prior.
    f.write(loft_it.SMALL_SPEC.format(samples=4000, replication=1, per_sample_ms=0.5).replace(
        "jitter: 0.0", "jitter: 0.3"))
out = os.path.join(tmp, "out")
r = subprocess.run([loft_it.exe("loftctl"), "cluster", "run", spec, "--policy", "uniform", "--iterations", "24",
                    "--out", out, "--timeout-s", "100"], capture_output=True, text=True, timeout=115)
assert r.returncode == 0, r.stderr[-3000:]
cal = os.path.join(tmp, "calibrated.yaml")
r = r_cal = subprocess.run([loft_it.exe("loftctl"), "calibrate", out, "--out", cal], capture_output=True,
                           text=True, timeout=30)
print(r.stderr)
assert r.returncode == 0, r.stderr
# The calibrated spec loads (loft-sim's loader is the same as loftctl plan's).
r = subprocess.run([loft_it.exe("loftctl"), "plan", "--cluster", cal, "--policy", "uniform"], capture_output=True, text=True,
                   timeout=30)
assert r.returncode == 0, r.stderr
with open(os.path.join(out, "status.json")) as f:
    workers = {w["name"]: w["profile"] for w in json.load(f)["workers"]}
text = open(cal).read()
assert "# Calibrated by `loftctl calibrate" in text
for name, p in workers.items():
    block = text.split(f"- name: {name}\n")[1].split("- name:")[0]
    # Compared as numbers: a fit at exactly 0 is written "0", which Python's repr spells "0.0".
    m = re.search(r"compute: \{fixed_ms: ([^,]+), per_sample_ms: ([^,}]+)[,}]", block)
    assert m, (name, block)
    fixed, per_sample = float(m.group(1)), float(m.group(2))
    # A negative fixed cost is written as 0.
    assert fixed == max(0.0, p["compute_fixed_ms"]), (name, block, p)
    if p["compute_per_sample_ms"] > 0:
        assert per_sample == p["compute_per_sample_ms"], (name, block, p)
    else:
        # Uniform batches are all the same size, so the fit may put the whole
        # time into the fixed cost; calibrate then keeps the prior and says so.
        assert per_sample == 0.5 and "compute.per_sample_ms (fitted 0)" in r_cal.stderr, (name, block, p)
    assert (p["compute_per_sample_ms"], p["compute_fixed_ms"]) != (0.5, 2.0), "the fit never left the prior"
    # No agent reports its serving time here: the uplink stays the spec's.
    assert "up_mbps: 1000," in block, f"{name}: unobserved uplink must keep the spec's rate"
    # The agents emulated the spec's links (cluster run's default): --links auto keeps them.
    assert "link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}" in block, (name, block)
# --links fit writes the fitted laws instead; auto said why it kept them.
cal_fit = os.path.join(tmp, "fit.yaml")
r = subprocess.run([loft_it.exe("loftctl"), "calibrate", out, "--out", cal_fit, "--links", "fit"],
                   capture_output=True, text=True, timeout=30)
assert r.returncode == 0, r.stderr
assert "link (enforced" not in r.stderr, r.stderr
r = subprocess.run([loft_it.exe("loftctl"), "calibrate", out, "--out", cal], capture_output=True, text=True,
                   timeout=30)
assert r.returncode == 0 and "agents enforced the spec's links" in r.stderr, r.stderr
r = subprocess.run([loft_it.exe("loftctl"), "calibrate", out, "--out", cal, "--links", "bogus"],
                   capture_output=True, text=True, timeout=30)
assert r.returncode != 0, "an unknown --links value must be refused"
print("ok")
