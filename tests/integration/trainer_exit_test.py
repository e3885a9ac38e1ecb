"""`loftctl cluster run --trainer` when a process it started dies (a
launcher defect, fixed): before the fix the run printed the trainers' errors and
then waited for its own --timeout-s. Now every case below must fail within
FAIL_WITHIN_S (far below the run's --timeout-s of 600 s), exit non-zero,
name the process and its exit status, its log and the log's last lines, leave
no summary.json (status.json says failed) and leave no process behind:

  exit3     every trainer prints to stderr and exits 3 at once;
  exit0     every trainer exits 0 at once (a trainer must consume until
            the job's last iteration);
  killed    the trainers start a background `sleep` and wait; one trainer
            is SIGKILLed after the job started: the run fails naming
            signal 9 and the other trainers' process groups, background
            sleeps included, are gone afterwards;
  agent     one node's cache directory has its ingest marker but no
            RocksDB files: its agent exits 1 at start.

No torch needed: the trainers are `sh -c` commands. Spec training.model
external (agents in compute_mode external, one trainer each)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import loft_it

FAIL_WITHIN_S = 20  # detection within a second, then SIGTERM, 3 s grace per tier, SIGKILL
RUN_TIMEOUT_S = 600
SPEC = """dataset: {name: fashion-mnist, samples: 4000, sample_bytes: 784}
placement: {kind: shards, replication: 1}
training: {global_batch: 256, min_batch: 8, iterations: 40, overlap: true, seed: 7, model: external,
           aggregation: mean}
nodes:
  - name: edge
    count: 4
    compute: {fixed_ms: 2.0, per_sample_ms: 0.1, jitter: 0.0}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""

tmp = tempfile.mkdtemp(prefix="loft-it-trainer-exit-")
spec = os.path.join(tmp, "spec.yaml")
with open(spec, "w") as f:
    f.write(SPEC)
caches = os.path.join(tmp, "caches")
r = subprocess.run([loft_it.exe("loftctl"), "ingest", "--cluster", spec, "--all", "--root", caches],
                   capture_output=True, text=True, timeout=300)
assert r.returncode == 0, r.stderr


def start(case, trainer, cache_root=caches):
    out = os.path.join(tmp, case)
    cmd = [loft_it.exe("loftctl"), "cluster", "run", spec, "--out", out, "--cache-root", cache_root, "--insecure",
           "--iterations", "20", "--timeout-s", str(RUN_TIMEOUT_S), "--trainer", trainer]
    loft_it.log(f"{case}: {' '.join(cmd)}")
    return out, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(case, out, p, t0):
    try:
        stdout, stderr = p.communicate(timeout=FAIL_WITHIN_S + 10)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)  # cluster run stops its processes on SIGINT
        try:
            stdout, stderr = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
            for pid, _ in loft_it.processes_mentioning(tmp):
                os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"{case}: cluster run still running {FAIL_WITHIN_S + 10} s after the failure:\n"
                             f"{stderr[-3000:]}")
    took = time.time() - t0
    loft_it.log(f"{case}: exit {p.returncode} after {took:.1f} s")
    sys.stderr.write(stderr[-1500:])
    assert p.returncode not in (0, 130), f"{case}: cluster run exited {p.returncode}"
    assert took < FAIL_WITHIN_S, f"{case}: the run took {took:.1f} s to fail (bound {FAIL_WITHIN_S} s)"
    assert not os.path.exists(os.path.join(out, "summary.json")), f"{case}: a failed run wrote summary.json"
    with open(os.path.join(out, "status.json")) as f:
        st = json.load(f)
    assert st.get("failed") is True and st.get("error"), f"{case}: status.json not marked failed: {st}"
    left = loft_it.processes_mentioning(tmp) + loft_it.processes_mentioning("sleep 1207")
    assert not left, f"{case}: processes left running: {left}"
    assert "cluster run: done" not in stderr and "ledger " not in stdout, f"{case}: reported as done:\n{stdout}"
    return stderr


def error_line(stderr):
    lines = stderr.splitlines()
    at = [i for i, l in enumerate(lines) if l.startswith("loftctl cluster run: ")]
    assert at, stderr[-2000:]
    return "\n".join(lines[at[-1]:])


# exit3: every trainer fails at once.
t0 = time.time()
out, p = start("exit3", 'sh -c "echo boom-$LOFT_NODE >&2; exit 3"')
err = error_line(finish("exit3", out, p, t0))
node = err.split("the trainer of node ", 1)[-1].split(" ", 1)[0]
assert node.startswith("edge-"), err
assert "exited with status 3" in err, err
assert os.path.join(out, "logs", f"trainer-{node}.log") in err, err
assert f"boom-{node}" in err, err

# exit0: a trainer that leaves before the job's last iteration.
t0 = time.time()
out, p = start("exit0", 'sh -c "echo leaving"')
err = error_line(finish("exit0", out, p, t0))
assert "the trainer of node edge-" in err and "exited with status 0" in err, err
assert "leaving" in err, err

# killed: SIGKILL of one trainer once the job runs; the others' background sleeps go too.
out, p = start("killed", 'sh -c "sleep 1207 & sleep 1208"')
deadline = time.time() + 60
victim = None
while victim is None and time.time() < deadline and p.poll() is None:
    shells = [pid for pid, cmd in loft_it.processes_mentioning("sleep 1207 & sleep 1208") if cmd.startswith("sh")]
    running = [pid for pid, _ in loft_it.processes_mentioning("sleep 1207")]
    if len(shells) == 4 and len(running) >= 8:
        victim = shells[0]
    else:
        time.sleep(0.2)
assert victim is not None, f"trainers never all started (run exit {p.poll()})"
time.sleep(1.5)  # the job has started: the agents registered and the scheduler planned
t0 = time.time()
os.kill(victim, signal.SIGKILL)
err = error_line(finish("killed", out, p, t0))
assert "the trainer of node edge-" in err and "exited with signal 9" in err, err

# agent: a cache with its marker but no database.
bad = os.path.join(tmp, "bad-caches")
subprocess.run(["cp", "-r", caches, bad], check=True)
for f in os.listdir(os.path.join(bad, "edge-1")):
    if f != "LOFT_INGESTED":
        os.remove(os.path.join(bad, "edge-1", f))
t0 = time.time()
out, p = start("agent", 'sh -c "exec sleep 1207"', cache_root=bad)
err = error_line(finish("agent", out, p, t0))
assert "agent edge-1 exited with status 1" in err, err
assert os.path.join(out, "logs", "agent-edge-1.log") in err and "no sample cache" in err, err
print("ok: exit3, exit0, killed and agent runs failed promptly, named the process, left nothing running")
