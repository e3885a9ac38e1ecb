"""Helpers for the PyTorch-on-loft tests: a scheduler and N agents in
compute_mode external (spec training.model external, insecure loopback,
ipc consumer sockets), one trainer process per agent
(examples/pytorch/train_fmnist.py), all on this machine. Env: LOFT_BIN_DIR,
LOFT_IT_DIR, LOFT_SOURCE_DIR, LOFT_PYTHONPATH (the built loft package)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.environ.get("LOFT_IT_DIR", os.path.dirname(__file__)))
import loft_it  # noqa: E402

SRC = os.environ.get("LOFT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
TRAINER = os.path.join(SRC, "examples/pytorch/train_fmnist.py")
PY = "/usr/bin/python3"  # Debian's, with python3-torch

SPEC = """dataset: {{name: fashion-mnist, samples: {samples}, sample_bytes: 784}}
placement: {{kind: shards, replication: {replication}}}
training: {{global_batch: {batch}, min_batch: 8, iterations: {iterations}, overlap: true, seed: 7, model: external, aggregation: {aggregation}}}
nodes:
  - name: edge
    count: {nodes}
    compute: {{fixed_ms: 2.0, per_sample_ms: 0.05, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
"""


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.environ.get("LOFT_PYTHONPATH", os.path.join(SRC, "build/python"))
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e["OMP_NUM_THREADS"] = "1"
    return e


class TorchCluster:
    def __init__(self, nodes, samples, batch, iterations, aggregation="mean", replication=1, consumer_timeout_ms=15000,
                 partition_timeout_ms=60000, spec_text=None, names=None, policy="loft"):
        spec = spec_text or SPEC.format(samples=samples, replication=replication, batch=batch, iterations=iterations,
                                        aggregation=aggregation, nodes=nodes)
        self.c = loft_it.Cluster(spec, secure=False, iterations=iterations, partition_timeout_ms=partition_timeout_ms,
                                 heartbeat_timeout_ms=3000)
        self.names = names or [f"edge-{i}" for i in range(nodes)]
        if policy != "loft":
            with open(self.c.sched_cfg) as f:
                cfg = f.read().replace("policy: loft\n", f"policy: {policy}\n")
            with open(self.c.sched_cfg, "w") as f:
                f.write(cfg)
        self.iterations = iterations
        self.consumer_timeout_ms = consumer_timeout_ms
        self.trainers = {}
        self.endpoints = {}

    @property
    def tmp(self):
        return self.c.tmp

    def start(self):
        self.c.prepare(self.names)
        self.c.start_scheduler()
        for n in self.names:
            cfg = self.c.agent_config(n)
            with open(cfg) as f:
                text = f.read().replace("compute_mode: synthetic\n", "")
            ep = f"ipc://{self.c.tmp}/{n}.sock"
            self.endpoints[n] = ep
            with open(cfg, "w") as f:
                f.write(text + f"compute_mode: external\nconsumer_endpoint: {ep}\n"
                               f"consumer_timeout_ms: {self.consumer_timeout_ms}\n")
            self.c._spawn(n, [loft_it.exe("loft-agent"), "--config", cfg])

    def start_trainer(self, name, *args, tag=""):
        out = open(os.path.join(self.c.tmp, f"trainer-{name}{tag}.out"), "w")
        err = open(os.path.join(self.c.tmp, f"trainer-{name}{tag}.log"), "w")
        e = env()
        e["LOFT_NODE"] = name
        p = subprocess.Popen([PY, TRAINER, "--endpoint", self.endpoints[name], "--iterations",
                              str(self.iterations), *args], stdout=out, stderr=err, env=e)
        self.trainers[name] = p
        return p

    def wait_trainers(self, timeout_s):
        results = {}
        for n, p in self.trainers.items():
            try:
                p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.dump()
                raise AssertionError(f"trainer {n} did not finish within {timeout_s} s")
            results[n] = self.result(n)
        return results

    def result(self, name, tag=""):
        with open(os.path.join(self.c.tmp, f"trainer-{name}{tag}.out")) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{")]
        if not lines:
            self.dump()
            raise AssertionError(f"trainer {name}{tag} printed no result")
        return json.loads(lines[-1])

    def dump(self):
        self.c.dump_logs(60)
        for f in sorted(os.listdir(self.c.tmp)):
            if f.startswith("trainer-"):
                with open(os.path.join(self.c.tmp, f)) as fh:
                    tail = fh.readlines()[-20:]
                print(f"---- {f} (tail) ----", file=sys.stderr)
                sys.stderr.writelines(tail)

    def stop(self):
        for p in self.trainers.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        self.c.stop()


def reference(*args, timeout=900):
    r = subprocess.run([PY, TRAINER, "--reference", *args], capture_output=True, text=True, env=env(),
                       timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
