"""C API consumer against a real loft-scheduler and two loft-agents
(insecure loopback; edge-0 runs compute_mode external on an ipc endpoint,
edge-1 synthetic). A consumer that takes one batch and exits without
reporting makes the agent fail that partition (retried through lineage);
a second consumer then takes every batch, checks payloads (784 bytes) and
labels (0..9) and reports its compute time; the run completes with
ledger duplicates 0 / lost 0 and retries > 0. Also the error paths
(bad endpoint, timeout).
argv: <consumer_it binary>; env LOFT_BIN_DIR, LOFT_IT_DIR (loft_it.py)."""
import os
import re
import urllib.request
import subprocess
import sys
import time

sys.path.insert(0, os.environ["LOFT_IT_DIR"])
import loft_it  # noqa: E402

consumer_it = sys.argv[1]
spec = loft_it.SMALL_SPEC.format(samples=2000, replication=2, per_sample_ms=0.05).replace("count: 4", "count: 2")
c = loft_it.Cluster(spec, secure=False, iterations=16)
consumer = None
try:
    sock = os.path.join(c.tmp, "consumer.sock")
    endpoint = f"ipc://{sock}"
    r = subprocess.run([consumer_it, "errors", f"ipc://{c.tmp}/nobody.sock"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr

    c.prepare(["edge-0", "edge-1"])
    c.start_scheduler()
    cfg = c.agent_config("edge-0")
    with open(cfg) as f:
        text = f.read().replace("compute_mode: synthetic\n", "")
    with open(cfg, "w") as f:
        metrics_port = loft_it.free_port()
        f.write(text + f"metrics_port: {metrics_port}\ncompute_mode: external\nconsumer_endpoint: {endpoint}\nconsumer_timeout_ms: 3000\n")
    c._spawn("edge-0", [loft_it.exe("loft-agent"), "--config", cfg])
    c.start_agent("edge-1")
    # The ipc socket file is owner-only (it was created with the umask's mode).
    loft_it.log("waiting for the consumer socket")
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    mode = os.stat(sock).st_mode & 0o777
    assert mode == 0o600, oct(mode)

    # The Python package (python/loft) takes and acknowledges one batch; a
    # second consumer opened while it is connected is refused (it used to
    # replace the first), and the first one still gets the next batch.
    py = ("import sys; sys.path.insert(0, sys.argv[2]); import loft\n"
          "with loft.Consumer(sys.argv[1]) as c:\n"
          "    with c.next(30000) as b:\n"
          "        assert len(b) > 0 and all(len(b.payload(i)) == 784 for i in range(len(b)))\n"
          "        assert all(0 <= l <= 9 for l in b.labels) and len(b.bytes_payload(0)) == 784\n"
          "        assert bytes(b.payloads())[:784] == b.bytes_payload(0) and b.round == -1\n"
          "        ids, labs = list(b.sample_ids), list(b.labels)\n"
          "        assert ids == [loft._batch_sid(b._h, i) for i in range(len(b))] and len(set(ids)) == len(b)\n"
          "        assert labs == [loft._batch_label(b._h, i) for i in range(len(b))]\n"
          "        b.report(1.5)\n"
          "    assert list(b.labels) == labs and list(b.sample_ids_array()) == ids  # kept after close\n"
          "    print('python batch', b.partition_id, len(b))\n"
          "    with loft.Consumer(sys.argv[1]) as intruder:\n"
          "        try:\n"
          "            intruder.next(1500)\n"
          "            raise SystemExit('a second consumer was not refused')\n"
          "        except loft.LoftError as e:\n"
          "            assert 'another consumer is connected' in str(e), str(e)\n"
          "            print('second consumer refused:', e)\n"
          "    with c.next(30000) as b:\n"
          "        b.report(1.5)\n"
          "        print('python batch after the refusal', b.partition_id, len(b))\n")
    r = subprocess.run([sys.executable, "-c", py, endpoint, os.environ["LOFT_PY_DIR"]], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    loft_it.log(r.stdout.strip())
    r = subprocess.run([consumer_it, "abandon", endpoint], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    loft_it.log(r.stdout.strip())
    consumer = subprocess.Popen([consumer_it, "consume", endpoint, "4000"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    st = c.wait_for(lambda s: s["finished"], 100, "job finished")
    out, err = consumer.communicate(timeout=30)
    assert consumer.returncode == 0, out + err
    loft_it.log(out.strip())
    batches = int(out.split("batches=")[1].split()[0])
    assert batches > 0, out
    loft_it.check_ledger(st, 1)
    assert st["ledger"]["samples_committed"] >= 2000, st["ledger"]
    assert st["ledger"]["retries"] > 0, st["ledger"]
    with open(os.path.join(c.tmp, "edge-0.log")) as f:
        agent_log = f.read()
    assert "consumer disconnected" in agent_log, agent_log[-3000:]
    # The agent reported the consumer's compute time (250 ms per C batch),
    # not its own wall time (a few ms per batch).
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    m = re.search(r'loft_agent_partition_ms_sum\{[^}]*"compute"[^}]*\} (\S+)', metrics)
    assert m, metrics[-2000:]
    compute_sum = float(m.group(1))
    assert compute_sum >= 250.0 * batches, (compute_sum, batches)
    loft_it.log(f"agent compute_ms sum {compute_sum:.1f} for {batches} C batches")
    print("ok", st["ledger"], f"consumer batches={batches}")
finally:
    if consumer is not None and consumer.poll() is None:
        consumer.kill()
    c.stop()
