"""An agent whose CURVE key is not in the scheduler's allow-list cannot
register (its handshake fails at the ZAP handler), while a listed agent
can; a node may not register under another node's name."""
import os
import shutil
import time

import loft_it

spec = loft_it.SMALL_SPEC.format(samples=4000, replication=1, per_sample_ms=0.02)
c = loft_it.Cluster(spec)
try:
    c.prepare([f"edge-{i}" for i in range(4)])
    # A rogue key set: same node names, keys the scheduler never saw.
    rogue = os.path.join(c.tmp, "rogue")
    c.loftctl("keygen", "--out", rogue, "--spec", c.spec)
    shutil.copy(os.path.join(c.keys, "scheduler.pub"), os.path.join(rogue, "scheduler.pub"))
    c.start_scheduler()
    c.start_agent("edge-0")                   # legitimate
    c.start_agent("edge-1", keys_dir=rogue)   # unknown key
    c.wait_for(lambda s: s["workers"][0]["registered"], 30, "edge-0 registered")
    time.sleep(3)
    st = c.status()
    assert st is not None
    assert st["workers"][0]["registered"]
    assert not st["workers"][1]["registered"], st["workers"][1]
    assert 1 not in st["live_nodes"]
    print("ok: unknown key rejected", st["live_nodes"])
finally:
    c.stop()
