"""`loftctl cluster run` stopped before its job finished still writes
summary.json, iterations.csv and training.csv of what it did, marked
"stopped" with the reason (tools/loftctl/README.md, "How a run ends"):
  1. Ctrl-C: SIGINT to loftctl's whole process group, as a terminal sends
     it, after a few iterations: exit status 130, reason "interrupted".
  2. --timeout-s on a job far longer than it: exit status 1, reason
     "deadline".
  3. every agent frozen (SIGSTOP) mid-run, --no-progress-timeout-s 4: no
     iteration completes, the run stops about 4 s later with exit status 1,
     reason "no_progress" (the default is 300 s).
Each case: summary.json parses and its stopped.iterations_completed equals
the run recorder's count and the iterations in iterations.csv (the
simulator's header, one row per worker per iteration), training.csv
parses with the loss of the iterations trained, status.json is marked
stopped, and no daemon of the run is left running."""
import csv
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import loft_it

NODES = 3
SPEC = f"""dataset: {{name: fashion-mnist, samples: 6000, sample_bytes: 784}}
placement: {{kind: shards, replication: 1}}
training: {{global_batch: 192, min_batch: 8, iterations: 100000, overlap: true, seed: 7,
           model: softmax, aggregation: mean, learning_rate: 0.1}}
nodes:
  - name: edge
    count: {NODES}
    compute: {{fixed_ms: 1.0, per_sample_ms: 0.01, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
"""
tmp = tempfile.mkdtemp(prefix="loft-it-stop-")
spec = os.path.join(tmp, "spec.yaml")
with open(spec, "w") as f:
    f.write(SPEC)
caches = os.path.join(tmp, "caches")  # ingested once, shared by the runs


def start(name, *extra):
    out = os.path.join(tmp, name)
    os.makedirs(out)
    err = open(os.path.join(out, "loftctl.stderr"), "w")
    # Its own session: a signal to its process group reaches loftctl and
    # whatever shares the group, as a Ctrl-C in a terminal does.
    p = subprocess.Popen([loft_it.exe("loftctl"), "cluster", "run", spec, "--policy", "loft", "--out", out,
                          "--insecure", "--cache-root", caches, "--eval-every", "0", *extra],
                         stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
    return p, out


def stderr_of(out):
    with open(os.path.join(out, "loftctl.stderr")) as f:
        return f.read()


def wait_for_iteration(p, out, n, timeout_s=120):
    """Waits until loftctl's progress line shows iteration >= n."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        its = [int(m) for m in re.findall(r"\] iteration (\d+)/", stderr_of(out))]
        if its and max(its) >= n:
            return
        assert p.poll() is None, f"cluster run ended early ({p.returncode}):\n{stderr_of(out)[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"no iteration {n} within {timeout_s} s:\n{stderr_of(out)[-3000:]}")


def check_stopped_files(out, reason):
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    st = s.get("stopped")
    assert st is not None, f"summary.json is not marked stopped: {s}"
    assert st["reason"] == reason, st
    assert st["iterations_target"] == 100000, st
    n = st["iterations_completed"]
    assert n >= 2, st
    assert "rows_error" not in st, st
    p = s["policies"]["loft"]
    assert p["mean_iteration_ms"] > 0 and p["total_s"] > 0, p
    assert s["ledger"]["duplicates"] == 0, s["ledger"]
    with open(os.path.join(out, "iterations.csv")) as f:
        header = f.readline().strip()
        f.seek(0)
        rows = list(csv.DictReader(f))
    assert header.startswith("policy,iteration,epoch,worker,batch"), header
    iterations = sorted({int(r["iteration"]) for r in rows})
    assert iterations == list(range(n)), (n, iterations[:5], iterations[-5:])
    rows_of, batch_of = {}, {}
    for r in rows:
        it = int(r["iteration"])
        rows_of[it] = rows_of.get(it, 0) + 1
        batch_of[it] = batch_of.get(it, 0) + int(r["batch"])
    # One row per worker and 192 samples per iteration (an epoch's last one
    # takes the 6000 % 192 = 48 left). The last few iterations may lack the
    # row of a worker that froze or stopped in them.
    assert all(1 <= k <= NODES for k in rows_of.values()), rows_of
    incomplete = [it for it in range(n - 4) if rows_of[it] != NODES or batch_of[it] not in (192, 48)]
    assert not incomplete, [(it, rows_of[it], batch_of[it]) for it in incomplete]
    with open(os.path.join(out, "training.csv")) as f:
        train = list(csv.DictReader(f))
    assert train, "training.csv has no rows"
    assert list(train[0].keys()) == ["iteration", "wall_s", "loss", "test_accuracy"], list(train[0].keys())
    # A loss per trained iteration, from 0 on. An iteration's rows close
    # when all its partitions are reported done, its loss when its ring
    # round is; the two reports race, so at the stop either file may lead:
    # the last few iterations (at most the agents' 4-credit windows) may
    # have rows and no loss yet, or a loss whose last worker row had not
    # arrived.
    assert [int(r["iteration"]) for r in train] == list(range(len(train))), [r["iteration"] for r in train]
    assert n - 8 <= len(train) <= n + 4, (len(train), n)
    assert all(float(r["loss"]) > 0 for r in train), train[:3]
    with open(os.path.join(out, "status.json")) as f:
        status = json.load(f)
    assert status["stopped"]["reason"] == reason, status.get("stopped")
    assert status["run"]["iterations_completed"] == n, status["run"]
    left = loft_it.processes_mentioning(out)
    assert not left, f"still running after the run stopped: {left}"
    return n


# 1. Ctrl-C.
p, out = start("interrupted")
wait_for_iteration(p, out, 6)
os.killpg(p.pid, signal.SIGINT)
rc = p.wait(timeout=90)
print(stderr_of(out)[-1500:])
assert rc == 130, f"an interrupted run exits with 130, not {rc}"
n = check_stopped_files(out, "interrupted")
assert "interrupted by SIGINT" in stderr_of(out), stderr_of(out)[-1000:]
loft_it.log(f"interrupted: {n} iterations written")

# 2. An explicit deadline far shorter than the job.
p, out = start("deadline", "--timeout-s", "12")
t0 = time.time()
rc = p.wait(timeout=120)
print(stderr_of(out)[-1500:])
assert rc == 1, f"a run past its deadline exits with 1, not {rc}"
assert time.time() - t0 < 60, time.time() - t0
n = check_stopped_files(out, "deadline")
assert "--timeout-s 12 s" in stderr_of(out), stderr_of(out)[-1000:]
loft_it.log(f"deadline: {n} iterations written")

# 3. No progress: every agent frozen.
p, out = start("no-progress", "--no-progress-timeout-s", "4")
wait_for_iteration(p, out, 6)
agents = [pid for pid, cmd in loft_it.processes_mentioning(out) if "loft-agent" in cmd]
assert len(agents) == NODES, agents
for pid in agents:
    os.kill(pid, signal.SIGSTOP)
frozen_at = time.time()
rc = p.wait(timeout=90)
waited = time.time() - frozen_at
print(stderr_of(out)[-1500:])
assert rc == 1, f"a run without progress exits with 1, not {rc}"
assert 3 <= waited <= 40, f"stopped {waited:.1f} s after the agents froze (no-progress timeout 4 s)"
n = check_stopped_files(out, "no_progress")
assert "no iteration completed for 4 s" in stderr_of(out), stderr_of(out)[-1000:]
loft_it.log(f"no progress: stopped {waited:.1f} s after the freeze, {n} iterations written")
print("ok")
