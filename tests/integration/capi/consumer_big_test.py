"""A partition of >= 4,096 samples reaches an external consumer (the
consumer socket: the consumer used to receive one frame per sample and
dropped any message of more than 4,096 frames, so such a partition could
never be consumed and was retried forever). Scheduler + 2 agents (edge-0
external on ipc, edge-1 synthetic), global batch 8,192: the Python consumer
must receive a batch of >= 4,096 samples (every payload 784 bytes, in one
zero-copy region) and the run finishes with lost 0, duplicates 0.
env: LOFT_BIN_DIR, LOFT_IT_DIR, LOFT_PY_DIR, LOFT_LIBRARY."""
import os
import subprocess
import sys

sys.path.insert(0, os.environ["LOFT_IT_DIR"])
import loft_it  # noqa: E402

spec = """dataset: {name: fashion-mnist, samples: 20000, sample_bytes: 784}
placement: {kind: shards, replication: 2}
training: {global_batch: 8192, min_batch: 8, iterations: 3, overlap: true, seed: 7, model: none}
nodes:
  - name: edge
    count: 2
    compute: {fixed_ms: 2.0, per_sample_ms: 0.01, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""
c = loft_it.Cluster(spec, secure=False, iterations=3, partition_timeout_ms=20000)
consumer = None
try:
    endpoint = f"ipc://{c.tmp}/consumer.sock"
    c.prepare(["edge-0", "edge-1"])
    c.start_scheduler()
    cfg = c.agent_config("edge-0")
    with open(cfg) as f:
        text = f.read().replace("compute_mode: synthetic\n", "")
    with open(cfg, "w") as f:
        f.write(text + f"compute_mode: external\nconsumer_endpoint: {endpoint}\nconsumer_timeout_ms: 10000\n")
    c._spawn("edge-0", [loft_it.exe("loft-agent"), "--config", cfg])
    c.start_agent("edge-1")
    py = ("import sys; sys.path.insert(0, sys.argv[2]); import loft\n"
          "biggest = 0\n"
          "with loft.Consumer(sys.argv[1]) as c:\n"
          "    for b in c.batches(8000):\n"
          "        n = len(b)\n"
          "        assert bytes(b.payloads()) == b''.join(b.bytes_payload(i) for i in range(n))\n"
          "        assert all(len(b.payload(i)) == 784 for i in range(n))\n"
          "        biggest = max(biggest, n)\n"
          "        b.report(1.0)\n"
          "print('biggest batch', biggest)\n")
    consumer = subprocess.Popen([sys.executable, "-c", py, endpoint, os.environ["LOFT_PY_DIR"]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    st = c.wait_for(lambda s: s["finished"], 150, "job finished")
    out, err = consumer.communicate(timeout=60)
    assert consumer.returncode == 0, out + err
    biggest = int(out.split("biggest batch")[1].split()[0])
    assert biggest >= 4096, out  # 4,096 payload frames + the envelope used to exceed the cap
    loft_it.check_ledger(st, 0)
    assert st["ledger"]["samples_committed"] >= 20000, st["ledger"]  # the epoch (3 x 8,192 > 20,000)
    print("ok", st["ledger"], f"biggest consumer batch {biggest}")
finally:
    if consumer is not None and consumer.poll() is None:
        consumer.kill()
    c.stop()
