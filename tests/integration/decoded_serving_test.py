"""Decoded serving end to end (dataset.decode_placement: auto), black-box
through `loftctl cluster run`: real scheduler and agents over loopback
sockets, 6,000 Fashion-MNIST images stored as JPEG records (96x96,
quality 90, augment crop_flip).

The spec gives one node a 0.05-core CPU quota (`slow`), so its decode prior
is 20x the others' and the planner has holders preprocess samples for it
(Partition.decoded_from); the holders serve the 784-byte model inputs
(FetchRequest.decoded) and the trainer spot-checks 1 in 32 of them against
the records it preprocesses itself; a holder's first 64 decoded samples are
all checked (probation), so a forger is caught for certain
(edge_agent/README.md "Decoded serving").

1. Honest holders: every iteration completes, the agents agree on the
   parameters, the accuracy clears the augmented floor of
   jpeg_training_test, some holder served decoded samples, and the spot
   check found nothing (no poisoning reported).
2. One holder is `byzantine: poison_decoded` (honest records, inverted
   decoded inputs): the spot check reports it, and only it, as a poisoner.
"""
import json
import re

import loft_it
import training_lib

ITER = 60
SAMPLES = 6000
JPEG = ", encoding: jpeg, image_size: 96, jpeg_quality: 90, augment: crop_flip, decode_placement: auto"
FLOOR = 0.55  # jpeg_training_test's crop_flip floor (0.672 measured in one process)

SLOW = """  - name: slow
    count: 1
    compute: {fixed_ms: 1.0, per_sample_ms: 0.01, jitter: 0.0, cpu_cores: 0.05}
    disk: {read_mbps: 800}
    link: {up_mbps: 1000, down_mbps: 1000, latency_ms: 1}
"""

common = dict(iterations=ITER, samples=SAMPLES, aggregation="mean", lr=0.05, eval_every=30, policy="loft",
              dataset_extra=JPEG, extra_nodes=SLOW)


def agents_text(out, names):
    return "".join(training_lib.agent_log(out, n) for n in names)


# 1. Honest holders.
summary, rows, out = training_lib.run("decoded", honest=3, **common)
tr = summary["training"]
loft_it.log(f"decoded: training {tr}, poisoning {summary.get('poisoning')}, ledger {summary['ledger']}")
assert tr["hash_mismatches"] == 0, f"agents disagree on parameters: {tr}"
assert tr["iterations_reported"] == ITER, tr
acc = summary["final_accuracy"]
assert acc is not None and acc >= FLOOR, f"final test accuracy {acc} < {FLOOR}"
names = ["edge-0", "edge-1", "edge-2", "slow"]
logs = agents_text(out, names)
assert "decoded serving: preprocessed" in logs, "no holder served a decoded sample"
assert summary["poisoning"]["samples"] == 0, summary["poisoning"]
l = summary["ledger"]
assert l["duplicates"] == 0 and l["lost"] == 0, l

# 2. A holder that forges decoded samples.
att, att_rows, att_out = training_lib.run("decoded-poison", honest=3, byzantine="poison_decoded", **common)
p = att["poisoning"]
loft_it.log(f"poison_decoded: poisoning {p}, ledger {att['ledger']}")
byz_log = training_lib.agent_log(att_out, "byz")
served = sum(int(m.group(1)) for m in re.finditer(r"poison_decoded: served (\d+) forged decoded", byz_log))
assert served > 0, "the poison_decoded holder never decoded for a peer: nothing was tested"
assert p["samples"] > 0, f"the spot check caught none of {served} forged decoded samples: {p}"
byz_node = 3  # edge-0..2, byz, slow in spec order
assert set(int(k) for k in p["samples_by_peer"]) == {byz_node}, p
print("ok", json.dumps({"accuracy": acc, "forged_served": served, "caught": p["samples"]}))
