"""Corrupt-record livelock, black-box through
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

import loft_it

N = 2000
c = loft_it.Cluster(loft_it.SMALL_SPEC.format(samples=N, replication=1, per_sample_ms=0.2), secure=False)
bad, l, out = loft_it.run_with_corrupt_sample(c, "edge-0", N)
logs = "".join(open(p, errors="replace").read() for p in glob.glob(os.path.join(out, "**", "*.log"), recursive=True))
assert "QUARANTINE:" in logs, "the scheduler did not log the quarantine"
assert f"sample {bad}" in logs, "no agent named the damaged sample"
print("ok", json.dumps(l))
