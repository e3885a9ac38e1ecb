"""Review finding "corrupt record livelock" (issue 18), black-box through
`loftctl cluster run`: one record in edge-0's RocksDB cache is damaged (its
CRC no longer matches; tests/integration/cache_corrupt.cc) and replication is
1, so no other node can serve that sample.

Before the fix the partition holding it failed on every attempt and the
epoch never completed (the run timed out with 0 epochs). Now the agent names
the sample in PartitionFailed.bad_samples, the scheduler quarantines it after
3 reports, the epoch completes, summary.json's ledger lists it as
`unavailable` (never committed) and every other sample is committed once per
epoch (duplicates 0, lost 0, samples_committed = epochs x (N - 1) + the
current epoch's share).
"""
import glob
import json
import os
import subprocess
import sys

import loft_it

N = 2000
c = loft_it.Cluster(loft_it.SMALL_SPEC.format(samples=N, replication=1, per_sample_ms=0.2), secure=False)
caches = os.path.join(c.tmp, "caches")
c.loftctl("ingest", "--cluster", c.spec, "--all", "--root", caches, timeout=300)
r = subprocess.run([loft_it.exe("cache_corrupt"), os.path.join(caches, "edge-0")], capture_output=True, text=True)
assert r.returncode == 0, r.stderr
bad = int(r.stdout.strip())
loft_it.log(f"damaged the record of sample {bad} in edge-0's cache")
out = os.path.join(c.tmp, "out")
run = c.loftctl("cluster", "run", c.spec, "--out", out, "--cache-root", caches, "--insecure",
                "--iterations", "40", "--partition-timeout-ms", "3000", "--timeout-s", "240",
                check=False, timeout=400)
sys.stderr.write(run.stderr[-3000:])
assert run.returncode == 0, f"cluster run failed ({run.returncode})"
with open(os.path.join(out, "summary.json")) as f:
    l = json.load(f)["ledger"]
loft_it.log(f"ledger: {l}")
E = l["epochs_completed"]
assert E >= 2, f"epochs did not complete: {l}"
assert l["unavailable_samples"] == [bad], l
assert l["unavailable"] >= E, l  # left out of every completed epoch
assert l["duplicates"] == 0 and l["lost"] == 0, l
current = l["samples_committed"] - E * (N - 1)
assert 0 <= current < N - 1, f"committed {l['samples_committed']} is not {E} x {N - 1} + a partial epoch"
logs = "".join(open(p, errors="replace").read() for p in glob.glob(os.path.join(out, "**", "*.log"), recursive=True))
assert "QUARANTINE:" in logs, "the scheduler did not log the quarantine"
assert f"sample {bad}" in logs, "no agent named the damaged sample"
print("ok", json.dumps(l))
