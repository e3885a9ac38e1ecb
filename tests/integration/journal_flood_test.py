"""Journal and memory growth, black-box: an
authenticated agent (CURVE key of node edge-4, which never registers) floods
the scheduler while 4 real agents run a job whose journal_dir is a small
tmpfs, then the scheduler is killed with -9 and restarted.

Before the fix every PartitionDone/Failed was journaled in full, even for
unknown partitions, a failure reason could be up to 16 MiB, and the ROUTER
queued 10,000 messages per connection: the flood filled the tmpfs, the
journal append failed and the scheduler stopped. Now: a 100 KB reason gets
an Error naming PartitionFailed.reason, a 15 MB message exceeds the
scheduler's inbound limit and never arrives, reports for unknown partitions
are counted (status reports_ignored) and not journaled, so the journal stays
small; after kill -9 the scheduler recovers and the job completes with 0
lost and 0 duplicated samples.

Needs root to mount the tmpfs: otherwise prints why and exits 77 (skipped).
"""
import json
import os
import subprocess
import sys

import loft_it

SPEC = """dataset: {name: fashion-mnist, samples: 4000, sample_bytes: 784}
placement: {kind: shards, replication: 2}
training: {global_batch: 256, min_batch: 8, iterations: 120, overlap: true, seed: 7, model: none}
nodes:
  - name: edge
    count: 5
    compute: {fixed_ms: 2.0, per_sample_ms: 2.0, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""
TMPFS_MB = 96


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


c = loft_it.Cluster(SPEC, iterations=120, partition_timeout_ms=3000)
journal = os.path.join(c.tmp, "journal")
os.makedirs(journal)
r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs", journal],
                   capture_output=True, text=True)
if r.returncode != 0:
    print(f"SKIP: cannot mount a tmpfs for journal_dir (needs root): {r.stderr.strip()}")
    sys.exit(77)
with open(c.sched_cfg, "a") as f:
    f.write("min_workers: 4\n")
failures = []
try:
    c.start(loft_it.edge_names(4), extra_keys=["edge-4"])  # edge-4: the flooding client's key
    c.wait_for(lambda s: s["iteration"] >= 2, 60, "iteration 2")
    before = dir_bytes(journal)
    flood = subprocess.run([loft_it.exe("it_client"), "flood", c.endpoint, c.keys, "edge-4", "4", "4"],
                           capture_output=True, text=True, timeout=120)
    sys.stderr.write(flood.stderr)
    counts = json.loads(flood.stdout.strip().splitlines()[-1])
    loft_it.log(f"flood: {counts}")
    if flood.returncode != 0:
        failures.append(f"flood client checks failed: {flood.stderr.strip()}")
    if not c.alive("scheduler"):
        c.dump_logs()
        failures.append("the scheduler died under the flood")
    else:
        st = c.wait_for(lambda s: s.get("reports_ignored", s["ledger"]["acks_ignored"]) >= counts["sent"] * 9 // 10, 60,
                        "flood reports counted")
        grown = dir_bytes(journal) - before
        flood_bytes = st.get("reports_ignored", st["ledger"]["acks_ignored"]) * 2000  # half of them carry a 4,000-byte reason
        loft_it.log(f"journal grew {grown} bytes during the flood; reports_ignored {st.get('reports_ignored')} "
                    f"(~{flood_bytes} bytes of reports)")
        assert flood_bytes > (8 << 20), f"the flood was too small to show anything: {counts}"
        if grown >= (4 << 20):
            failures.append(f"the journal grew {grown} bytes under the flood")
        at = st["iteration"] + 3
        st = c.wait_for(lambda s: s["iteration"] >= at, 90, f"iteration {at}")
        assert not st["finished"], "the job ended before the restart: raise training.iterations"
        c.kill_and_restart_scheduler(st)
        st = c.wait_for(lambda s: s["finished"], 180, "job finished after restart")
        loft_it.check_ledger(st, 6)
        with open(os.path.join(c.tmp, "scheduler.log")) as f:
            if "journal append" in f.read():
                failures.append("a journal append failed")
    if failures:
        for f in failures:
            print("FAIL:", f, file=sys.stderr)
        sys.exit(1)
    print("ok", json.dumps(st["ledger"]), "journal bytes", dir_bytes(journal))
finally:
    c.stop()
    subprocess.run(["umount", journal], capture_output=True)
