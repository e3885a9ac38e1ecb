"""kill -9 of the scheduler mid-epoch and restart with the same config: it
replays its RocksDB journal, continues the epoch with the same agents and
completes 2 epochs with ledger duplicates = 0 and lost = 0. Partitions whose
messages died with the old process time out and are retried as child
partitions, so the job runs a few iterations more than 2 clean epochs."""
import loft_it

c = loft_it.small_cluster(iterations=40)
try:
    c.start(loft_it.edge_names(4))
    st = c.wait_for(lambda s: s["iteration"] >= 8, 60, "iteration 8")
    c.kill_and_restart_scheduler(st)
    st = c.wait_for(lambda s: s["finished"], 90, "job finished after restart")
    loft_it.check_ledger(st, 2)
    assert st["ledger"]["samples_committed"] >= 8000, st["ledger"]
    print("ok", st["ledger"])
finally:
    c.stop()
