"""A crashed holder is waited for, but not forever (black-box, spec
scheduler.holder_wait_s): four agents, replication 1, 2,000 samples, 256 a
batch (8 iterations an epoch), holder_wait_s 4.

edge-3 is killed (kill -9) in the first epoch. The other agents train what
they hold; then every unconsumed sample of the epoch is held only by the
dead edge-3 and planning waits, visibly: the status has `holder_wait` with
the samples, the dead holder and the time waited of the 4 s. After 4 s the
samples are left out of the epoch (ledger.held_out, counted in unavailable),
the epoch completes and training goes on. edge-3 is restarted: from then on
nothing more is held out (its samples are trained again) and the run ends at
its 40 iterations, nothing lost or trained twice.

Before the fix planning waited for edge-3 for ever ("epoch 0: N unconsumed
samples are held only by dead nodes; waiting for a holder to come back") and
the status said nothing about the wait.
"""
import json

import loft_it

SPEC = """dataset: {name: fashion-mnist, samples: 2000, sample_bytes: 784}
placement: {kind: shards, replication: 1}
training: {global_batch: 256, min_batch: 8, iterations: 40, overlap: true, seed: 7, model: none}
scheduler: {holder_wait_s: 4}
nodes:
  - name: edge
    count: 4
    compute: {fixed_ms: 2.0, per_sample_ms: 0.4, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""

c = loft_it.Cluster(SPEC, secure=False, iterations=40, partition_timeout_ms=3000)
try:
    names = loft_it.edge_names(4)
    c.start(names)
    c.wait_for(lambda s: s["iteration"] >= 1, 60, "iteration 1")
    c.kill9("edge-3")
    loft_it.log("killed edge-3")
    st = c.wait_for(lambda s: "holder_wait" in s, 30, "a visible wait for the dead holder")
    w = st["holder_wait"]
    loft_it.log(f"waiting: {w} at iteration {st['iteration']}")
    assert w["dead_holders"] == ["edge-3"], w
    assert w["limit_s"] == 4 and 0 <= w["waited_s"] <= 4 + 2, w
    assert w["samples"] > 0, w
    blocked_at = st["iteration"]
    st = c.wait_for(lambda s: s["ledger"]["held_out"] > 0 and s["iteration"] > blocked_at, 30,
                    "the dead holder's samples left out and training going on")
    l = st["ledger"]
    loft_it.log(f"after the wait: iteration {st['iteration']}, ledger {l}")
    assert l["held_out"] >= 1, (l, w)
    assert l["unavailable"] >= l["held_out"], l
    assert l["epochs_completed"] >= 1, l
    c.start_agent("edge-3")
    st = c.wait_for(lambda s: s["workers"][3]["live"], 30, "edge-3 back")
    held_out = st["ledger"]["held_out"]
    loft_it.log(f"edge-3 back at iteration {st['iteration']}, held out so far {held_out}")
    st = c.wait_for(lambda s: s["finished"], 120, "the run's 40 iterations")
    l = st["ledger"]
    loft_it.log(f"finished: ledger {l}")
    assert st["iteration"] == 39, st["iteration"]
    assert l["held_out"] == held_out, f"samples were held out with edge-3 live again: {l}"
    assert l["duplicates"] == 0 and l["lost"] == 0, l
    assert "holder_wait" not in st, st["holder_wait"]
    print("ok", json.dumps(l))
finally:
    c.stop()
