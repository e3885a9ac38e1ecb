"""Shared helpers of the training integration tests: write a spec, run
`loftctl cluster run` on it (real scheduler + agents, insecure loopback,
CURVE not needed), return summary.json and the training.csv rows (loss and test
accuracy per iteration over wall time; iterations.csv has the per-worker rows)."""
import csv
import json
import os
import subprocess
import tempfile
import time

import loft_it

SPEC = """dataset: {{name: fashion-mnist, samples: 60000, sample_bytes: 784}}
placement: {{kind: shards, replication: 1}}
training: {{global_batch: {batch}, min_batch: 8, iterations: {iterations}, overlap: true, seed: 7,
           model: {model}, aggregation: {aggregation}, learning_rate: {lr}, momentum: 0.9}}
nodes:
  - name: edge
    count: {honest}
    compute: {{fixed_ms: 1.0, per_sample_ms: 0.01, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
{byzantine}"""

BYZ = """  - name: byz
    count: 1
    compute: {{fixed_ms: 1.0, per_sample_ms: {per_sample_ms}, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
    byzantine: {kind}
    byzantine_scale: {scale}
"""


FLAKY = """  - name: flaky
    count: 1
    compute: {{fixed_ms: 1.0, per_sample_ms: 0.01, jitter: 0.0}}
    disk: {{read_mbps: 800}}
    link: {{up_mbps: 1000, down_mbps: 1000, latency_ms: 1}}
    failures: [{{at_s: {at_s}, down_s: {down_s}}}]
"""


def run(name, *, honest, iterations, aggregation="mean", batch=512, lr=0.1, model="mlp", byzantine=None,
        scale=10, eval_every=50, cache_root=None, timeout_s=600, extra_nodes="", insecure=True,
        min_batch=8, placement="{kind: shards, replication: 1}", training_extra="", policy="uniform",
        byz_per_sample_ms=0.01, samples=60000, spec_extra="", dataset_extra="", before_run=None):
    """dataset_extra: text added inside the spec's dataset map (e.g.
    ", encoding: jpeg"); before_run(spec_path, tmp_dir): called once the
    spec is written, returns extra `cluster run` arguments (e.g. a
    --cache-root it prepared)."""
    tmp = tempfile.mkdtemp(prefix=f"loft-it-{name}-")
    spec = os.path.join(tmp, "spec.yaml")
    byz = BYZ.format(kind=byzantine, scale=scale, per_sample_ms=byz_per_sample_ms) if byzantine else ""
    text = SPEC.format(batch=batch, iterations=iterations, model=model, aggregation=aggregation, lr=lr,
                       honest=honest, byzantine=byz + extra_nodes)
    for old, new in (("min_batch: 8,", f"min_batch: {min_batch},{training_extra}"),
                     ("placement: {kind: shards, replication: 1}", f"placement: {placement}"),
                     ("samples: 60000,", f"samples: {samples},"),
                     ("sample_bytes: 784}", f"sample_bytes: 784{dataset_extra}}}")):
        assert old in text, f"training_lib.SPEC no longer contains {old!r}: the option would be ignored"
        text = text.replace(old, new)
    with open(spec, "w") as f:
        f.write(text + spec_extra)
    out = os.path.join(tmp, "out")
    cmd = [loft_it.exe("loftctl"), "cluster", "run", spec, "--policy", policy, "--out", out,
           "--timeout-s", str(timeout_s), "--eval-every", str(eval_every)]
    if insecure:
        cmd.append("--insecure")
    if cache_root:
        cmd += ["--cache-root", cache_root]
    if before_run:
        cmd += before_run(spec, tmp)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 60)
    loft_it.log(f"{name}: cluster run took {time.time() - t0:.1f} s")
    if r.returncode != 0:
        print(r.stderr[-4000:])
        for log in sorted(os.listdir(os.path.join(out, "logs"))):
            with open(os.path.join(out, "logs", log)) as f:
                print(f"--- {log}\n" + f.read()[-2000:])
        raise AssertionError(f"{name}: cluster run failed ({r.returncode})")
    print(r.stdout)
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(out, "training.csv")) as f:
        rows = list(csv.DictReader(f))
    return summary, rows, out


def scheduler_log(out):
    """Everything but the agents' logs of a run's out dir (the scheduler's)."""
    logs = os.path.join(out, "logs")
    text = ""
    for name in sorted(os.listdir(logs)):
        if not name.startswith("agent-"):
            with open(os.path.join(logs, name)) as f:
                text += f.read()
    return text


def status(out):
    """The scheduler's last status JSON (per-iteration training entries)."""
    with open(os.path.join(out, "status.json")) as f:
        return json.load(f)


def agent_log(out, name):
    with open(os.path.join(out, "logs", f"agent-{name}.log")) as f:
        return f.read()
