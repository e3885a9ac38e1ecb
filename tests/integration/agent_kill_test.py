"""kill -9 of one agent mid-epoch (replication 2): the dead agent is
dropped after missed heartbeats, its in-flight partition is retried as a
child partition, the agent restarts and rejoins, and the run completes
2 epochs with ledger duplicates = 0, lost = 0 and retries > 0.

Two spare iterations: 2 epochs are 32 iterations of 256 (the last of each
epoch 160 samples) when nothing fails. The samples of failed partitions
return to the epoch's pool; with planning ahead two iterations can be
open when the agent dies, and their returned samples may need one more
(short) iteration in the epoch."""
import time

import loft_it

c = loft_it.Cluster(loft_it.SMALL_SPEC.format(samples=4000, replication=2, per_sample_ms=0.4),
                    iterations=34)
try:
    names = [f"edge-{i}" for i in range(4)]
    c.prepare(names)
    c.start_scheduler()
    for n in names:
        c.start_agent(n)
    c.wait_for(lambda s: s["iteration"] >= 5, 60, "iteration 5")
    loft_it.log("kill -9 edge-2")
    c.kill9("edge-2")
    st = c.wait_for(lambda s: 2 not in s["live_nodes"], 30, "edge-2 dropped from the view")
    view_without = st["view"]
    time.sleep(1.0)
    loft_it.log("restart edge-2")
    c.start_agent("edge-2")
    c.wait_for(lambda s: 2 in s["live_nodes"] and s["view"] > view_without, 30, "edge-2 back")
    st = c.wait_for(lambda s: s["finished"], 90, "job finished")
    loft_it.check_ledger(st, 2)
    assert st["ledger"]["retries"] > 0, st["ledger"]
    # Every sample of epochs 0 and 1 once, then part of epoch 2.
    assert 8000 <= st["ledger"]["samples_committed"] <= 34 * 256, st["ledger"]
    print("ok", st["ledger"])
finally:
    c.stop()
