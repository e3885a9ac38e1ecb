"""A re-sent assignment is not trained twice (restart and time): a scripted scheduler (it_client dup-assign) sends a
real loft-agent the same partition (id 42, attempt 0) twice at once and once
more after its report, then attempt 1 of it. The agent reports attempt 0
exactly once and attempt 1 once: a duplicate (id, attempt) is dropped, a new
attempt is not."""
import json
import subprocess

import loft_it

SPEC = """dataset: {name: fashion-mnist, samples: 400, sample_bytes: 784}
placement: {kind: shards, replication: 1}
training: {global_batch: 16, min_batch: 1, iterations: 4, seed: 7, model: none}
nodes:
  - name: edge-0
    compute: {fixed_ms: 2.0, per_sample_ms: 0.1, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""

c = loft_it.Cluster(SPEC, secure=False)
try:
    c.prepare(["edge-0"])
    fake = subprocess.Popen([loft_it.exe("it_client"), "dup-assign", c.endpoint], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    c.start_agent("edge-0")
    out, err = fake.communicate(timeout=60)
    assert fake.returncode == 0, f"it_client dup-assign failed: {err}"
    reports = json.loads(out.strip().splitlines()[-1])
    loft_it.log(f"reports by attempt: {reports}")
    assert c.alive("edge-0"), "the agent exited"
    assert reports.get("done/0", 0) == 1, f"attempt 0 reported {reports.get('done/0', 0)} times: {reports}"
    assert reports.get("done/1", 0) == 1, f"attempt 1 not run exactly once: {reports}"
    assert not any(k.startswith("failed") for k in reports), reports
    print("ok", reports)
finally:
    c.stop()
