"""Corrupt record on a serving peer: with replication 1 a sample
whose stored record is corrupt on node `holder` is mostly read by the OTHER
nodes (policy uniform: a global shuffle; holder's batch is capped at
min_batch = 8 of 256, so about 97% of the sample's attempts read it from
holder over the network). holder refuses the fetch (DataLoss) naming the
sample in Error.bad_samples; the requester reports it in
PartitionFailed.bad_samples, so the scheduler quarantines it after 3
reports, the epoch completes and summary.json lists it as `unavailable`.

Before the fix the serving peer's refusal carried no id and the
requester's report had no bad_samples: quarantine only counted holder's own
local reads of the sample (checked with the old agent: the sample was
quarantined only after 11 failed partitions instead of 3, and the log
assertions below failed: no refusal named the sample, no other node
reported it).
"""
import glob
import json
import os
import re

import loft_it

N = 2000
SPEC = f"""dataset: {{name: fashion-mnist, samples: {N}, sample_bytes: 784}}
placement: {{kind: shards, replication: 1}}
training: {{global_batch: 256, min_batch: 8, iterations: 40, overlap: true, seed: 7, model: none}}
nodes:
  - name: holder
    max_batch: 8
    compute: {{fixed_ms: 2.0, per_sample_ms: 0.2, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
  - name: edge
    count: 3
    compute: {{fixed_ms: 2.0, per_sample_ms: 0.2, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
"""
c = loft_it.Cluster(SPEC, secure=False)
bad, l, out = loft_it.run_with_corrupt_sample(c, "holder", N, "--policy", "uniform")
logs = {p: open(p, errors="replace").read() for p in glob.glob(os.path.join(out, "**", "*.log"), recursive=True)}
assert any("QUARANTINE:" in t for t in logs.values()), "the scheduler did not log the quarantine"
# holder refused the fetch naming the sample; another node reported it.
served = [p for p, t in logs.items() if re.search(rf"stored records failed their check \(first: sample {bad}\)", t)
          and "fetch by node" in t]
assert served, "the serving peer never named the corrupt sample in its refusal"
reporters = set()
for p, t in logs.items():
    for line in t.splitlines():
        if re.search(rf"partition \d+: \d+ stored records failed their check \(first: sample {bad}\); reported", line):
            reporters.add(os.path.basename(os.path.dirname(p)) + "/" + os.path.basename(p))
loft_it.log(f"reports of sample {bad} from: {sorted(reporters)}")
assert any("holder" not in r for r in reporters), f"no node other than holder reported the sample: {reporters}"
print("ok", json.dumps(l))
