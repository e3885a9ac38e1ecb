"""Helpers for loft's integration tests: real processes on loopback, free
ports, temp dirs. Stdlib only. Binaries come from LOFT_BIN_DIR."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("LOFT_BIN_DIR", os.path.join(os.path.dirname(__file__), "../../build/bin"))
DATASET = "/usr/share/datasets/fashion-mnist"
SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def exe(name):
    p = os.path.join(BIN, name)
    if not os.path.exists(p):
        sys.exit(f"missing binary {p}")
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_mentioning(text):
    """(pid, command line) of every process but this one whose command line contains `text`."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if text in cmd:
            found.append((int(d), cmd))
    return found


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


SMALL_SPEC = """dataset: {{name: fashion-mnist, samples: {samples}, sample_bytes: 784}}
placement: {{kind: shards, replication: {replication}}}
training: {{global_batch: 256, min_batch: 8, iterations: 32, overlap: true, seed: 7, model: none}}
nodes:
  - name: edge
    count: 4
    compute: {{fixed_ms: 2.0, per_sample_ms: {per_sample_ms}, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
"""


def edge_names(n):
    """edge-0 ... edge-(n-1): the node names of a spec's `- name: edge, count: n`."""
    return [f"edge-{i}" for i in range(n)]


def small_cluster(iterations, samples=4000, replication=1, per_sample_ms=0.4, partition_timeout_ms=3000, **kw):
    """A Cluster on SMALL_SPEC (4 nodes, model none), CURVE on."""
    return Cluster(SMALL_SPEC.format(samples=samples, replication=replication, per_sample_ms=per_sample_ms),
                   iterations=iterations, partition_timeout_ms=partition_timeout_ms, **kw)


class Cluster:
    """A scheduler and agents started as processes, configs in a temp dir."""

    def __init__(self, spec_text, secure=True, credits=2, heartbeat_timeout_ms=1500,
                 partition_timeout_ms=4000, iterations=0, tmp=None):
        self.tmp = tmp or tempfile.mkdtemp(prefix="loft-it-")
        self.spec = os.path.join(self.tmp, "spec.yaml")
        with open(self.spec, "w") as f:
            f.write(spec_text)
        self.secure = secure
        self.keys = os.path.join(self.tmp, "keys")
        self.port = free_port()
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.procs = {}
        self.names = []
        self.credits = credits
        self.sched_cfg = os.path.join(self.tmp, "scheduler.yaml")
        with open(self.sched_cfg, "w") as f:
            f.write(f"cluster_spec: {self.spec}\nbind: {self.endpoint}\n"
                    f"journal_dir: {self.tmp}/journal\nheartbeat_interval_ms: 250\n"
                    f"heartbeat_timeout_ms: {heartbeat_timeout_ms}\n"
                    f"partition_timeout_ms: {partition_timeout_ms}\niterations: {iterations}\n"
                    f"policy: loft\nlog_level: info\n")
            f.write(f"keys_dir: {self.keys}\n" if secure else "insecure: true\n")

    def loftctl(self, *args, check=True, timeout=120):
        r = subprocess.run([exe("loftctl"), *args], capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"loftctl {' '.join(args)} failed: {r.stderr}")
        return r

    def prepare(self, names):
        """CURVE keys (loftctl keygen) and caches (loftctl ingest --all)."""
        self.names = names
        if self.secure:
            self.loftctl("keygen", "--out", self.keys, "--spec", self.spec)
        self.caches = os.path.join(self.tmp, "caches")
        self.loftctl("ingest", "--cluster", self.spec, "--all", "--root", self.caches, timeout=300)

    def _spawn(self, name, argv):
        logf = open(os.path.join(self.tmp, f"{name}.log"), "a")
        self.procs[name] = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT)

    def start_scheduler(self):
        self._spawn("scheduler", [exe("loft-scheduler"), "--config", self.sched_cfg])

    def start(self, names, extra_keys=()):
        """Keys and caches (prepare) for `names` plus `extra_keys` (nodes that
        never start an agent, e.g. a test client using a node's key), then
        the scheduler and one agent per name."""
        self.prepare(list(names) + list(extra_keys))
        self.start_scheduler()
        for n in names:
            self.start_agent(n)

    def kill_and_restart_scheduler(self, st):
        """kill -9 of the scheduler (`st`: its last status), restarted with the
        same config: waits until it has replayed its journal and checks that
        no committed sample was forgotten. Returns the recovered status."""
        committed_before = st["ledger"]["samples_committed"]
        log(f"kill -9 scheduler at iteration {st['iteration']}")
        self.kill9("scheduler")
        self.start_scheduler()
        st = self.wait_for(lambda s: s["recovered"], 30, "recovered scheduler")
        assert st["ledger"]["samples_committed"] >= committed_before, (st["ledger"], committed_before)
        return st

    def agent_config(self, name, keys_dir=None, credits=None):
        cfg = os.path.join(self.tmp, f"agent-{name}.yaml")
        with open(cfg, "w") as f:
            f.write(f"node_name: {name}\ncluster_spec: {self.spec}\n"
                    f"cache_dir: {self.caches}/{name}\nscheduler_endpoint: {self.endpoint}\n"
                    f"peer_bind: tcp://127.0.0.1:0\ncredits: {credits or self.credits}\n"
                    f"compute_mode: synthetic\nheartbeat_interval_ms: 250\nscheduler_timeout_ms: 2000\n"
                    f"log_level: info\n")
            if self.secure:
                f.write(f"keys_dir: {keys_dir or self.keys}\n")
            else:
                f.write("insecure: true\n")
        return cfg

    def start_agent(self, name, **kw):
        self._spawn(name, [exe("loft-agent"), "--config", self.agent_config(name, **kw)])

    def kill9(self, name):
        p = self.procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait()

    def alive(self, name):
        return self.procs[name].poll() is None

    def status(self):
        args = ["status", "--scheduler", self.endpoint, "--json", "--timeout-ms", "1500"]
        args += ["--keys-dir", self.keys] if self.secure else ["--insecure"]
        r = self.loftctl(*args, check=False, timeout=30)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)

    def wait_for(self, pred, timeout_s, what):
        deadline = time.time() + timeout_s
        st = None
        while time.time() < deadline:
            if "scheduler" in self.procs and not self.alive("scheduler"):
                self.dump_logs()
                raise AssertionError("scheduler exited")
            st = self.status()
            if st is not None and pred(st):
                return st
            time.sleep(0.3)
        self.dump_logs()
        raise AssertionError(f"timed out waiting for {what}; last status: {json.dumps(st)[:2000]}")

    def dump_logs(self, lines=40):
        for name in self.procs:
            path = os.path.join(self.tmp, f"{name}.log")
            try:
                with open(path) as f:
                    tail = f.readlines()[-lines:]
                print(f"---- {name}.log (tail) ----", file=sys.stderr)
                sys.stderr.writelines(tail)
            except OSError:
                pass

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def check_ledger(st, epochs):
    l = st["ledger"]
    assert l["duplicates"] == 0, f"duplicates {l}"
    assert l["lost"] == 0, f"lost {l}"
    assert l["epochs_completed"] >= epochs, f"epochs {l}"


def run_with_corrupt_sample(c, node, samples, *run_args):
    """Ingests every node's cache under c.tmp, damages one record in `node`'s
    cache (cache_corrupt: its CRC no longer matches) and runs the job
    (`cluster run ... --insecure`, 40 iterations, run_args appended). Checks
    the ledger of a run that quarantined that one sample: at least 2 epochs
    completed without it, it is the only `unavailable` one, left out of every
    completed epoch, nothing lost or duplicated, and every other sample
    committed once per epoch. Returns (sample id, ledger, out dir)."""
    caches = os.path.join(c.tmp, "caches")
    c.loftctl("ingest", "--cluster", c.spec, "--all", "--root", caches, timeout=300)
    r = subprocess.run([exe("cache_corrupt"), os.path.join(caches, node)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    bad = int(r.stdout.strip())
    log(f"damaged the record of sample {bad} in {node}'s cache")
    out = os.path.join(c.tmp, "out")
    run = c.loftctl("cluster", "run", c.spec, "--out", out, "--cache-root", caches, "--insecure", *run_args,
                    "--iterations", "40", "--partition-timeout-ms", "3000", "--timeout-s", "240",
                    check=False, timeout=400)
    sys.stderr.write(run.stderr[-3000:])
    assert run.returncode == 0, f"cluster run failed ({run.returncode})"
    with open(os.path.join(out, "summary.json")) as f:
        l = json.load(f)["ledger"]
    log(f"ledger: {l}")
    E = l["epochs_completed"]
    assert E >= 2, f"epochs did not complete: {l}"
    assert l["unavailable_samples"] == [bad], l
    assert l["unavailable"] >= E, l  # left out of every completed epoch
    assert l["duplicates"] == 0 and l["lost"] == 0, l
    current = l["samples_committed"] - E * (samples - 1)
    assert 0 <= current < samples - 1, \
        f"committed {l['samples_committed']} is not {E} x {samples - 1} + a partial epoch"
    return bad, l, out
