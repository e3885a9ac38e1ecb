"""The C gradient exchange (loft_batch_allreduce) against a real scheduler
and three agents (compute_mode external, spec training.model external,
aggregation mean, insecure loopback, ipc consumer sockets), one C consumer
(allreduce_it.c) per agent:
  - rounds where every member is honest: each member's aggregate equals
    sum(b_i * g_i) / sum(b_i) over the members' batch sizes b_i (a member
    without samples joins with weight 0), identical on every member;
  - edge-2 sends a NaN gradient (rounds 2-3): with mean, every member that
    round gets the error "not finite" (nothing applied), never a wrong sum;
  - edge-2 sends 10 floats where the others send 8 (round 4): edge-2 gets
    "gradient has 10 floats ... have 8", the others the mean of theirs; in
    round 5 edge-2 (which applied nothing) is told its state is not the
    ring majority's (it publishes none, so it cannot be brought in step);
  - edge-2's consumer dies mid-round (round 6): the others' round 6 and 7
    complete, within the consumer timeout (no hang), and the job finishes
    with ledger lost 0 / duplicates 0.
argv: <allreduce_it binary>; env LOFT_BIN_DIR, LOFT_IT_DIR."""
import collections
import os
import subprocess
import sys
import time

sys.path.insert(0, os.environ["LOFT_IT_DIR"])
import loft_it  # noqa: E402

it = sys.argv[1]
N = 8
ITER = 10
spec = f"""dataset: {{name: fashion-mnist, samples: 3000, sample_bytes: 784}}
placement: {{kind: shards, replication: 2}}
training: {{global_batch: 96, min_batch: 8, iterations: {ITER}, overlap: true, seed: 7, model: external, aggregation: mean}}
nodes:
  - name: edge
    count: 3
    compute: {{fixed_ms: 2.0, per_sample_ms: 0.05, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
"""
c = loft_it.Cluster(spec, secure=False, iterations=ITER, partition_timeout_ms=60000, heartbeat_timeout_ms=3000)
names = ["edge-0", "edge-1", "edge-2"]
procs = {}
try:
    c.prepare(names)
    c.start_scheduler()
    eps = {}
    for n in names:
        cfg = c.agent_config(n)
        with open(cfg) as f:
            text = f.read().replace("compute_mode: synthetic\n", "")
        eps[n] = f"ipc://{c.tmp}/{n}.sock"
        with open(cfg, "w") as f:
            f.write(text + f"compute_mode: external\nconsumer_endpoint: {eps[n]}\nconsumer_timeout_ms: 4000\n")
        c._spawn(n, [loft_it.exe("loft-agent"), "--config", cfg])
    t0 = time.time()
    for i, n in enumerate(names):
        procs[n] = subprocess.Popen([it, eps[n], str(i), str(N), "byz" if n == "edge-2" else "normal", str(ITER - 1)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outs = {}
    for n, p in procs.items():
        out, err = p.communicate(timeout=240)
        outs[n] = out
        loft_it.log(f"{n} exit {p.returncode}:\n{out}{err}")
        assert p.returncode == (3 if n == "edge-2" else 0), (n, p.returncode, err)
    elapsed = time.time() - t0
    st = c.wait_for(lambda s: s["finished"], 120, "job finished")

    rows = collections.defaultdict(dict)  # round -> node -> parsed line
    for i, n in enumerate(names):
        for line in outs[n].splitlines():
            w = line.split()
            if len(w) < 4 or w[0] != "round" or w[2] == "dying":
                continue
            r = int(w[1])
            if n in rows[r]:
                # A second batch of a round this member already all-reduced
                # (e.g. edge-2's round-5 partition, retried here because
                # edge-2's state was not the majority's): its gradient is
                # carried (outcome 0); the round's row stays the first one.
                assert w[5] == "0", f"{n} got two batches of round {r} without carrying: {line}"
                continue
            rows[r][n] = {"count": int(w[3]), "outcome": int(w[5]), "rest": w[6:], "line": line, "node": i}

    def expect_mean(r, members):
        num = sum(rows[r][m]["count"] * (rows[r][m]["node"] + 1) for m in members if m in rows[r])
        den = sum(rows[r][m]["count"] for m in members if m in rows[r])
        return num / den

    checked = 0
    for r in (0, 1):
        assert set(rows[r]) == set(names), (r, rows[r])
        want = expect_mean(r, names)
        for n in names:
            row = rows[r][n]
            assert row["outcome"] == 1, row["line"]
            agg0, aggn = float(row["rest"][1]), float(row["rest"][3])
            assert abs(agg0 - want) <= 1e-5 * want, (r, n, agg0, want)
            assert abs(aggn - want * N) <= 1e-5 * want * N, (r, n, aggn, want * N)
            checked += 1
    for r in (2, 3):  # NaN from edge-2
        byz_has_samples = rows[r].get("edge-2", {}).get("count", 0) > 0
        for n, row in rows[r].items():
            if byz_has_samples:
                assert row["outcome"] == -1 and "not finite" in " ".join(row["rest"]), row["line"]
            else:
                assert row["outcome"] == 1, row["line"]
            checked += 1
    for r in (4, 5):  # edge-2 sends N + 2 floats in round 4; in round 5 it is behind (applied nothing)
        e2 = rows[r].get("edge-2")
        if r == 4 and e2 is not None and e2["count"] > 0:
            assert e2["outcome"] == -1, e2["line"]
            assert f"gradient has {N + 2} floats" in e2["line"] and f"have {N}" in e2["line"], e2["line"]
        if r == 5 and e2 is not None:
            assert e2["outcome"] == -1 and "not the ring majority's" in e2["line"], e2["line"]
        want = expect_mean(r, ["edge-0", "edge-1"])
        for n in ("edge-0", "edge-1"):
            row = rows[r][n]
            assert row["outcome"] == 1, row["line"]
            assert abs(float(row["rest"][1]) - want) <= 1e-5 * want, (r, n, row["line"], want)
            checked += 1
    for r in range(6, ITER):  # edge-2's consumer died in round 6: the others go on
        for n in ("edge-0", "edge-1"):
            assert n in rows[r] and rows[r][n]["outcome"] in (0, 1), (r, n, rows[r])
    loft_it.check_ledger(st, 0)
    assert st["ledger"]["in_flight"] == 0, st["ledger"]
    with open(os.path.join(c.tmp, "edge-2.log")) as f:
        log2 = f.read()
    assert "consumer disconnected" in log2, log2[-2000:]
    print(f"ok: {checked} aggregates checked, consumers done in {elapsed:.1f} s, ledger {st['ledger']}")
finally:
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    c.stop()
