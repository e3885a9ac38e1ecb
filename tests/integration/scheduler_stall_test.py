"""A stalled scheduler (kill -STOP for 6 s, then -CONT) mid-run
(restart and time). Agents hear nothing for longer than
their scheduler_timeout_ms (2 s here) and register again while they keep
running their partitions; the scheduler wakes up to heartbeats and reports
older than its heartbeat timeout (1.5 s), with every partition still
running. Nothing may
fail because of the stall: no node dropped, no partition failed, timed out
or retried, the view unchanged (re-registration of the same agent process
is a reconnect), and every partition acked exactly once (acks received by
the scheduler = partitions done), 0 lost, 0 duplicated samples."""
import json
import os
import signal
import time
import urllib.request

import loft_it


def metric(port, name, labels):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# Partitions of 64 samples at 200 ms each (12.8 s): the ones running when
# the scheduler stops are still running when it continues.
c = loft_it.Cluster(loft_it.SMALL_SPEC.format(samples=4000, replication=1, per_sample_ms=200),
                    iterations=3, partition_timeout_ms=30000)
try:
    names = [f"edge-{i}" for i in range(4)]
    c.prepare(names)
    mport = loft_it.free_port()
    with open(c.sched_cfg, "a") as f:
        f.write(f"metrics_port: {mport}\n")
    c.start_scheduler()
    for n in names:
        c.start_agent(n)
    st = c.wait_for(lambda s: s["iteration"] >= 0 and len(s["live_nodes"]) == 4, 60, "iteration 0")
    view = st["view"]
    sched = c.procs["scheduler"]
    loft_it.log(f"kill -STOP scheduler at iteration {st['iteration']} (view {view})")
    os.kill(sched.pid, signal.SIGSTOP)
    time.sleep(6)
    os.kill(sched.pid, signal.SIGCONT)
    loft_it.log("kill -CONT scheduler")
    st = c.wait_for(lambda s: s["finished"], 120, "job finished after the stall")
    l = st["ledger"]
    loft_it.check_ledger(st, 0)
    assert l["samples_committed"] == 3 * 256, l
    for k in ("failed", "timed_out", "retries", "acks_ignored"):
        assert l[k] == 0, f"{k} = {l[k]} after the stall: {l}"
    assert st["view"] == view, f"view {view} -> {st['view']}: the stall changed the membership"
    done = sum(w["partitions_done"] for w in st["workers"])
    acks = metric(mport, "loft_scheduler_received_total", 'body="partition_done"')
    loft_it.log(f"partitions done {done}, acks received {acks}, ledger {json.dumps(l)}")
    assert done == l["partitions"], (done, l)
    assert acks == done, f"{acks} acks for {done} partitions: a partition was trained twice"
    with open(os.path.join(c.tmp, "scheduler.log")) as f:
        text = f.read()
    assert "did not run for" in text, "the scheduler did not notice its stall"
    assert "reconnected edge-" in text, "no agent registered again during the stall (test too weak)"
    print("ok", l)
finally:
    c.stop()
