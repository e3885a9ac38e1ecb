"""Status rows, black-box (CURVE on): a 4-agent job of 1,100 iterations
records 4,400 rows, more than one status reply carries
(server/status_reply.h kMaxStatusRows = 4,096).

- An agent's key asking for rows gets Error{PermissionDenied}; the
  operator's key (loftctl) gets one page: at most 4,096 rows, and the next
  page from where it asked, to the last row.
- `loftctl cluster run` of the same spec pages through them: its
  iterations.csv has every row (4 x 1,100), as when one reply held all.

Before paging, any listed key got every row in one reply, however many."""
import csv
import json
import os
import subprocess

import loft_it

ITERATIONS = 1100
PAGE = 4096
PERMISSION_DENIED = 9


def status_rows(c, key, start):
    r = subprocess.run([loft_it.exe("it_client"), "status", c.endpoint, c.keys, key, str(start)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


c = loft_it.small_cluster(ITERATIONS, per_sample_ms=0.02)
try:
    c.start(loft_it.edge_names(4))
    st = c.wait_for(lambda s: s["finished"], 100, "job finished")
    rows = 4 * ITERATIONS
    agent = status_rows(c, "edge-0", 0)
    loft_it.log(f"edge-0's key: {agent}")
    assert agent.get("error") == PERMISSION_DENIED, agent
    assert "loftctl" in agent["message"], agent
    first = status_rows(c, "loftctl", 0)
    loft_it.log(f"loftctl's key, rows from 0: {first}")
    assert first == {**first, "rows": PAGE, "rows_from": 0, "rows_kept": rows}, first
    assert first["bytes"] < PAGE * 200 + (1 << 20), first
    rest = status_rows(c, "loftctl", PAGE)
    loft_it.log(f"loftctl's key, rows from {PAGE}: {rest}")
    assert rest == {**rest, "rows": rows - PAGE, "rows_from": PAGE, "rows_kept": rows}, rest
finally:
    c.stop()

out = os.path.join(c.tmp, "run")
r = subprocess.run([loft_it.exe("loftctl"), "cluster", "run", c.spec, "--policy", "loft", "--iterations",
                    str(ITERATIONS), "--out", out, "--timeout-s", "100"], capture_output=True, text=True,
                   timeout=115)
print(r.stderr[-2000:])
assert r.returncode == 0, f"cluster run failed ({r.returncode})"
with open(os.path.join(out, "iterations.csv")) as f:
    got = list(csv.DictReader(f))
assert len(got) == 4 * ITERATIONS, len(got)
per_iteration = {}
for row in got:
    per_iteration.setdefault(int(row["iteration"]), set()).add(row["worker"])
assert sorted(per_iteration) == list(range(ITERATIONS)), sorted(per_iteration)[:5]
assert all(len(w) == 4 for w in per_iteration.values())
print("ok", len(got), "rows in iterations.csv")
