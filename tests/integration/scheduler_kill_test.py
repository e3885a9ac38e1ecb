"""kill -9 of the scheduler mid-epoch and restart with the same config: it
replays its RocksDB journal, continues the epoch with the same agents and
completes 2 epochs with ledger duplicates = 0 and lost = 0. Partitions whose
messages died with the old process time out and are retried as child
partitions, so the job runs a few iterations more than 2 clean epochs."""
import loft_it

c = loft_it.Cluster(loft_it.SMALL_SPEC.format(samples=4000, replication=1, per_sample_ms=0.4),
                    iterations=40, partition_timeout_ms=3000)
try:
    names = [f"edge-{i}" for i in range(4)]
    c.prepare(names)
    c.start_scheduler()
    for n in names:
        c.start_agent(n)
    st = c.wait_for(lambda s: s["iteration"] >= 8, 60, "iteration 8")
    committed_before = st["ledger"]["samples_committed"]
    loft_it.log(f"kill -9 scheduler at iteration {st['iteration']}")
    c.kill9("scheduler")
    c.start_scheduler()
    st = c.wait_for(lambda s: s["recovered"], 30, "recovered scheduler")
    assert st["ledger"]["samples_committed"] >= committed_before, (st["ledger"], committed_before)
    st = c.wait_for(lambda s: s["finished"], 90, "job finished after restart")
    loft_it.check_ledger(st, 2)
    assert st["ledger"]["samples_committed"] >= 8000, st["ledger"]
    print("ok", st["ledger"])
finally:
    c.stop()
