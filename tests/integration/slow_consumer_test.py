"""Credit-based flow control under a slow consumer: a fake agent grants 1
credit, acks its partition without granting another; the scheduler sends
nothing more (in_flight 0, credits 0, at most 1 queued) until the agent
grants again, and never has more than 1 partition in flight to it."""
import subprocess

import loft_it

spec = """dataset: {name: fashion-mnist, samples: 4000, sample_bytes: 784}
placement: {kind: shards, replication: 1}
training: {global_batch: 256, min_batch: 8, iterations: 100, overlap: true, seed: 7, model: none}
nodes:
  - name: solo
    compute: {fixed_ms: 2.0, per_sample_ms: 0.02}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""
c = loft_it.Cluster(spec, secure=False, heartbeat_timeout_ms=5000, partition_timeout_ms=60000)
try:
    c.start_scheduler()
    c.wait_for(lambda s: s is not None, 20, "scheduler up")
    r = subprocess.run([loft_it.exe("it_client"), "slow-agent", c.endpoint, "solo"], capture_output=True,
                       text=True, timeout=60)
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0, "slow-agent checks failed"
    assert c.alive("scheduler")
finally:
    c.stop()
