"""Connection hijack: a holder of a listed CURVE
key that is not edge-1's (loftctl's, edge-2's) connects under the routing id
edge-1 would use ("edge-1") and keeps reconnecting. It must receive nothing
meant for edge-1 (assignments, grants, views), and edge-1 must keep working:
it stays live, its partitions keep completing and the job finishes with a
clean ledger. Before routes were bound to the CURVE identity, ROUTER_HANDOVER
gave the hijacker edge-1's connection and its assignments."""
import json
import subprocess

import loft_it

c = loft_it.small_cluster(iterations=400)
try:
    c.start(loft_it.edge_names(4))
    st = c.wait_for(lambda s: s["iteration"] >= 3, 60, "iteration 3")
    done_before = st["workers"][1]["partitions_done"]
    view_before = st["view"]
    got = {}
    for key in ("loftctl", "edge-2"):  # one after the other: both claim the same id
        argv = [loft_it.exe("it_client"), "hijack", c.endpoint, c.keys, key, "edge-1", "4"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"hijacker {key} failed: {r.stderr}"
        got[key] = json.loads(r.stdout.strip().splitlines()[-1])
        loft_it.log(f"hijacker with key {key} received {got[key]}")
    st = c.status()
    assert st is not None
    loft_it.log(f"edge-1 after the hijack attempts: {st['workers'][1]}")
    for key, g in got.items():
        for body in ("assignment", "serve_grant", "view", "register_reply", "heartbeat"):
            assert g.get(body, 0) == 0, f"hijacker with key {key} received {g[body]} {body} meant for edge-1"
        assert g.get("status_reply", 0) > 0, f"hijacker {key} never got through the handshake: {g}"
    assert st["workers"][1]["live"], st["workers"][1]
    assert st["workers"][1]["partitions_done"] > done_before, ("edge-1 stopped working", st["workers"][1])
    st = c.wait_for(lambda s: s["finished"], 90, "job finished")
    loft_it.check_ledger(st, 1)
    assert st["ledger"]["failed"] == 0 and st["ledger"]["timed_out"] == 0, st["ledger"]
    print("ok", got, st["ledger"], "view", view_before, "->", st["view"])
finally:
    c.stop()
