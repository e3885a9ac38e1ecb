"""Journal compaction, black-box: a job whose scheduler snapshots its state
into the journal every SNAPSHOT_EVERY entries (journal_snapshot_every). The
journal's stored entries (status `journal.entries`: what a restart replays)
must stay within one interval plus a tick's updates for the whole run.
After several snapshots the scheduler is killed with -9 mid-epoch and
restarted: it restores the newest snapshot, replays only the entries after
it (its log says how many), keeps snapshotting, and the job completes with
0 lost and 0 duplicated samples."""
import os
import re
import time

import loft_it

SNAPSHOT_EVERY = 60
# One interval, plus what one tick can add before its snapshot (4 nodes:
# a plan, its sends and acks, a few failures on the restart).
BOUND = SNAPSHOT_EVERY + 40


def journal_of(st):
    j = st.get("journal")
    assert j is not None, f"status has no journal section: {st}"
    return j


def watch(c, until, timeout_s, what, seen):
    """Polls the status until until(st), recording the largest journal.entries."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if not c.alive("scheduler"):
            c.dump_logs()
            raise AssertionError("scheduler exited")
        st = c.status()
        if st is not None:
            seen.append(journal_of(st)["entries"])
            if until(st):
                return st
        time.sleep(0.1)
    c.dump_logs()
    raise AssertionError(f"timed out waiting for {what}")


c = loft_it.small_cluster(iterations=60)
with open(c.sched_cfg, "a") as f:
    f.write(f"journal_snapshot_every: {SNAPSHOT_EVERY}\n")
try:
    c.start(loft_it.edge_names(4))
    seen = []
    st = watch(c, lambda s: journal_of(s)["snapshots_written"] >= 3 and s["iteration"] >= 8, 90,
               "three journal snapshots", seen)
    j = journal_of(st)
    loft_it.log(f"before the kill: iteration {st['iteration']}, journal {j}")
    assert j["snapshot_seq"] >= 3 * SNAPSHOT_EVERY, j
    assert j["next_seq"] == j["snapshot_seq"] + j["entries"], j
    assert not st["finished"], "the job ended before the kill: raise iterations"
    c.kill_and_restart_scheduler(st)

    with open(os.path.join(c.tmp, "scheduler.log")) as f:
        found = re.findall(r"recovered from journal .*?: snapshot at entry (\d+), (\d+) updates replayed", f.read())
    assert found, "no recovery line in scheduler.log"
    snapshot_at, replayed = map(int, found[-1])
    loft_it.log(f"recovered from the snapshot at entry {snapshot_at} + {replayed} entries")
    assert snapshot_at >= j["snapshot_seq"], (snapshot_at, j)
    assert replayed <= BOUND, f"the restart replayed {replayed} entries, more than {BOUND}"

    st = watch(c, lambda s: s["finished"], 120, "job finished after restart", seen)
    loft_it.check_ledger(st, 2)
    j2 = journal_of(st)
    loft_it.log(f"finished: journal {j2}, largest entries seen {max(seen)} over {len(seen)} polls")
    assert j2["snapshots_written"] >= 1, f"no snapshot after the restart: {j2}"
    assert j2["snapshot_seq"] > snapshot_at, j2
    assert max(seen) <= BOUND, f"journal.entries reached {max(seen)} (bound {BOUND})"
    assert j2["next_seq"] > 6 * SNAPSHOT_EVERY, f"too short a run to show compaction: {j2}"
    print("ok", st["ledger"], "journal", j2)
finally:
    c.stop()
