"""10,000 random and malformed messages to the scheduler's ROUTER socket
(random bytes, wrong protocol version, no body, unaccepted types,
multipart junk, acks for unknown partitions/nodes): the scheduler stays up,
counts them, and answers a valid StatusRequest afterwards."""
import json
import subprocess

import loft_it

c = loft_it.Cluster(loft_it.SMALL_SPEC.format(samples=4000, replication=1, per_sample_ms=0.02), secure=False)
try:
    c.start_scheduler()
    c.wait_for(lambda s: s is not None, 20, "scheduler up")
    r = subprocess.run([loft_it.exe("it_client"), "garbage", c.endpoint, "10000"], capture_output=True,
                       text=True, timeout=100)
    print(r.stderr[-2000:])
    assert r.returncode == 0, "garbage client failed"
    assert c.alive("scheduler"), "scheduler died"
    st = c.status()
    assert st is not None and "ledger" in st
    print("ok", json.dumps(st["ledger"]))
finally:
    c.stop()
