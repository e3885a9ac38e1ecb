"""Registration checks (one agent must not halt everyone), against a real loft-scheduler with a scripted client:
 - peer_endpoint / ring_endpoint that are empty, garbage or a megabyte long
   are refused with an error naming the field (they would reach every
   member in the next view); one over the scheduler's inbound message limit
   (server/message_limits.h) never reaches it: ZeroMQ drops the message and
   the scheduler stays up;
 - a node re-registering as a new process again and again (each one a new
   view for everyone) is refused after one free re-registration, with a
   wait that doubles; the view grows by 2, not by the number of attempts."""
import json
import subprocess

import loft_it

SPEC = loft_it.SMALL_SPEC.format(samples=4000, replication=1, per_sample_ms=0.02).replace(
    "model: none", "model: softmax")


def register(c, node, peer, ring, count=1, interval_ms=0, expect_reply=True):
    r = subprocess.run([loft_it.exe("it_client"), "register", c.endpoint, node, peer, ring, str(count),
                        str(interval_ms)], capture_output=True, text=True, timeout=60)
    if not expect_reply:
        assert r.returncode != 0 and "no reply" in r.stderr, (r.returncode, r.stdout, r.stderr)
        return None
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


c = loft_it.Cluster(SPEC, secure=False)
try:
    c.start_scheduler()
    c.wait_for(lambda s: s is not None, 20, "scheduler up")
    good = "tcp://127.0.0.1:1"
    for field, peer, ring in (("peer_endpoint", "-", good), ("peer_endpoint", "garbage", good),
                              ("peer_endpoint", "@4000", good), ("ring_endpoint", good, "-"),
                              ("ring_endpoint", good, "tcp://*:5555"), ("ring_endpoint", good, "@300")):
        r = register(c, "edge-0", peer, ring)
        loft_it.log(f"{field} {peer[:20]!r} / {ring[:20]!r}: {r}")
        assert r["registered"] == 0, r
        assert field in r["errors"][0], r
        assert len(r["errors"][0]) < 500, "the error echoes the whole value"
    assert register(c, "edge-0", "@1000000", good, expect_reply=False) is None
    loft_it.log("a megabyte peer_endpoint: dropped by the inbound message limit, no reply")
    assert c.alive("scheduler"), "a megabyte registration stopped the scheduler"
    st = c.status()
    assert not st["workers"][0]["registered"], "a refused registration registered the node"
    view0 = st["view"]
    r = register(c, "edge-1", good, good, count=8, interval_ms=50)
    loft_it.log(f"8 registrations of edge-1 50 ms apart: {r['registered']} admitted, view {view0} -> {r['view']}")
    assert r["registered"] == 2, r
    assert len(r["errors"]) == 6 and all("too soon" in e for e in r["errors"]), r["errors"]
    assert r["view"] - view0 == 2, (view0, r["view"])
    assert c.alive("scheduler")
    print("ok", r)
finally:
    c.stop()
