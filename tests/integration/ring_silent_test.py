"""One agent that heartbeats but never joins the ring (one agent must not
halt everyone). edge-3 is a real loft-agent whose
ring_advertise points at a port nobody listens on: it registers, beats and
takes partitions, but no hello of it ever reaches the others, so every
round waits for it. The others report it ("silent") after two such rounds
in a row; a majority of the other live members reporting it evicts it, and
the job finishes among edge-0..2 (replication 2: edge-3's samples have
another replica) with a clean ledger. edge-3 itself finds
everyone silent, but its reports alone evict nobody.
Before: nothing evicted edge-3 and no round ever completed."""
import os

import loft_it

SPEC = loft_it.SMALL_SPEC.format(samples=4000, replication=2, per_sample_ms=0.02).replace(
    "model: none", "model: softmax").replace("iterations: 32", "iterations: 24")

c = loft_it.Cluster(SPEC, iterations=24, partition_timeout_ms=60000)
try:
    names = [f"edge-{i}" for i in range(4)]
    c.prepare(names)
    c.start_scheduler()
    for n in names:
        cfg = c.agent_config(n)
        with open(cfg, "a") as f:
            f.write("ring_timeout_ms: 1500\neval_every: 0\n")
            if n == "edge-3":
                f.write(f"ring_advertise: tcp://127.0.0.1:{loft_it.free_port()}\n")
        c._spawn(n, [loft_it.exe("loft-agent"), "--config", cfg])
    st = c.wait_for(lambda s: s["finished"], 100, "job finished without edge-3")
    loft_it.check_ledger(st, 1)
    w = {x["name"]: x for x in st["workers"]}
    assert not w["edge-3"]["live"], w["edge-3"]
    for n in names[:3]:
        assert w[n]["live"], (n, w[n])
    with open(os.path.join(c.tmp, "scheduler.log")) as f:
        log = f.read()
    assert "evicting node edge-3" in log, "edge-3 was not evicted by its ring's reports"
    for n in names[:3]:
        assert f"evicting node {n}" not in log, f"{n} was evicted"
    print("ok", st["ledger"], st["live_nodes"])
finally:
    c.stop()
