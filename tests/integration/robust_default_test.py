"""A robust rule is robust by default (black-box): six agents, aggregation
trimmed_mean, `training.byzantine_tolerance` left out, one member (node 5,
"byz") replacing every chunk it reduces with garbage (chunk_garbage), every
sample on two nodes (so the run does not depend on what happens to an
evicted node's samples).

With the tolerance left out the spec now means f = 1 (a robust rule on 2f+1
nodes): the scheduler says so at start, the ring verifies every chunk, the
honest agents detect the attacker's chunks (chunk_mismatch, counted in
ring_detection), the scheduler evicts it, every agent holds the same
parameters and the model learns. Before the fix the same spec ran the plain
ring (f = 0), which takes each chunk from its owner: nothing was detected and
the garbage went into everyone's model.

Then, without training: an explicit `byzantine_tolerance: 0` with the same
rule starts with a warning saying what is not protected, and a tolerance of
32 (above the verified ring's 31) is refused at start with an error naming
the key.
"""
import os
import subprocess
import tempfile
import time

import loft_it
import training_lib

ITER = 40
s, _, out = training_lib.run("robust-default", honest=5, byzantine="chunk_garbage", scale=10, iterations=ITER,
                             lr=0.05, aggregation="trimmed_mean", eval_every=20, batch=256, samples=6000,
                             placement="{kind: shards, replication: 2}", timeout_s=300)
log = training_lib.scheduler_log(out)
rd = s["ring_detection"]
acc = s["final_accuracy"]
loft_it.log(f"final accuracy {acc}, training {s['training']}, ring_detection {rd}")
assert "training.byzantine_tolerance 1 (implied by aggregation trimmed_mean)" in log, \
    "the scheduler did not say which tolerance the spec implies"
assert rd["offences_by_reason"].get("chunk_mismatch", 0) >= 8, f"the attacker's chunks were not detected: {rd}"
assert rd["evictions"] == 1 and rd["evicted"] == [5], f"the attacker was not evicted: {rd}"
assert s["training"]["hash_mismatches"] == 0, s["training"]
assert acc is not None and acc >= 0.6, f"accuracy {acc} after {ITER} iterations with a verified ring"

# An explicit 0 keeps the plain ring, with a warning; 32 is refused.
SPEC = """dataset: {{name: fashion-mnist, samples: 600, sample_bytes: 784}}
placement: {{kind: shards, replication: 1}}
training: {{global_batch: 60, min_batch: 1, iterations: 2, seed: 7, model: mlp, aggregation: trimmed_mean,
           byzantine_tolerance: {f}}}
nodes:
  - name: edge
    count: 3
"""


def scheduler_output(f, seconds):
    c = loft_it.Cluster(SPEC.format(f=f), secure=False, tmp=tempfile.mkdtemp(prefix="loft-it-robust-"))
    c.start_scheduler()
    deadline = time.time() + seconds
    while time.time() < deadline and c.alive("scheduler"):
        time.sleep(0.2)
    exited = not c.alive("scheduler")
    c.stop()
    with open(os.path.join(c.tmp, "scheduler.log")) as fh:
        return exited, fh.read()


exited, text = scheduler_output(0, 3)
assert not exited, f"the scheduler refused an explicit 0: {text[-2000:]}"
assert "training.aggregation trimmed_mean with byzantine_tolerance 0" in text and \
    "trusts every chunk's owner" in text, f"no warning for an explicit 0 with a robust rule: {text[-2000:]}"
exited, text = scheduler_output(32, 10)
assert exited, "the scheduler started with byzantine_tolerance 32"
assert "training.byzantine_tolerance must be <= 31" in text, f"no clear error for 32: {text[-2000:]}"
print("ok", acc)
