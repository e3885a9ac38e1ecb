"""Quarantine by accusation, black-box: four nodes, every sample on two of
them (replication 2, policy loft), three real agents and one Byzantine agent
(it_client accuse, registered as edge-3). The Byzantine agent

1. sends a poisoning report (PartitionFailed.poisoned_by) accusing edge-0
   for a partition that never existed, and
2. fails every partition it is given for 25 s, naming all its samples as
   corrupt records (bad_samples), over and over.

The samples it names all have a second, good copy on an honest node, and a
sample is only ever named by that one worker. Nothing may be quarantined and
nobody distrusted: the status ledger has no unavailable sample, poisoning
has no distrusted source and counts the made-up report as ignored, and the
honest agents keep training: an epoch completes with every sample committed,
the named ones included (read by honest workers from their good copies).

Before the fix (reports counted per sample, not per distinct reporter and
holder; a poisoning report acted on whatever partition it named), the same
run quarantined every sample the Byzantine agent named three times (its
shard left training for good) and, with f = 0, distrusted edge-0 on the
made-up report.
"""
import json
import subprocess

import loft_it

SPEC = """dataset: {name: fashion-mnist, samples: 2000, sample_bytes: 784}
placement: {kind: shards, replication: 2}
training: {global_batch: 128, min_batch: 8, iterations: 100000, overlap: true, seed: 7, model: none}
nodes:
  - name: edge
    count: 4
    compute: {fixed_ms: 2.0, per_sample_ms: 0.2, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""

c = loft_it.Cluster(SPEC, secure=False, partition_timeout_ms=3000)
try:
    honest = ["edge-0", "edge-1", "edge-2"]
    c.prepare(honest + ["edge-3"])
    c.start_scheduler()
    for n in honest:
        c.start_agent(n)
    liar = subprocess.run([loft_it.exe("it_client"), "accuse", c.endpoint, "edge-3", "0", "25"],
                          capture_output=True, text=True, timeout=120)
    assert liar.returncode == 0, f"it_client accuse failed: {liar.stderr}"
    out = json.loads(liar.stdout.strip().splitlines()[-1])
    st = out.pop("status")
    loft_it.log(f"Byzantine agent: {out}")
    loft_it.log(f"ledger: {st['ledger']}")
    loft_it.log(f"poisoning: {st['poisoning']}")
    # The attack ran: it failed partitions and named their samples.
    assert out["failures"] >= 3 and out["samples_named"] > 0, out
    l = st["ledger"]
    assert l["unavailable"] == 0 and l["unavailable_samples"] == [], \
        f"samples quarantined on one worker's word: {l}"
    p = st["poisoning"]
    assert p["distrusted_sources"] == [], f"a peer distrusted on a report for a made-up partition: {p}"
    assert p.get("ignored_reports", 0) >= 1, f"the made-up report was not counted as ignored: {p}"
    # Training went on without the liar's help: its named samples were read
    # by honest workers from their good copies.
    assert l["epochs_completed"] >= 1 and l["duplicates"] == 0 and l["lost"] == 0, l
    print("ok", json.dumps(out), json.dumps(l))
finally:
    c.stop()
