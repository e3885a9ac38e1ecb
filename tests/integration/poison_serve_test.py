"""A serving peer that flips labels with correct CRCs and
sample ids (`byzantine: poison_serve`). 4 honest agents + the poisoner
(node 4) train the MLP (`loftctl cluster run`, real processes); the clean
baseline is the same spec with the fifth node honest, in the same test.

Why the poisoner is always read from: policy `uniform` (a global-shuffle
policy) hands each worker the next samples of the epoch's permutation, so
about 4/5 of every worker's batch lives on other nodes; with every sample
on two nodes (`replication: 2`) the assigner picks the holder with the
most unconsumed samples, the poisoner among them. Iteration 0's plan is a
pure function of the spec, so the poisoner serves forged records in every
run (scheduler/assigner.h).

Asserts: the poisoner served forged records (> 0); every one was refused
(sum of the requesters' refusals == the poisoner's own count, no honest
agent accused anyone else); the scheduler counted them
(poisoning.samples_by_peer names only node 4), distrusted node 4 as a
source (poisoning.distrusted_sources == [4], the DISTRUSTED log line) and
never read from it for another worker afterwards (every forged record
belongs to a partition planned before the distrust); nothing was lost or
counted twice; accuracy within 1 point of clean (mean of the last three
test evaluations; cosine learning-rate decay so the end point does not
depend on which iteration a retried partition landed in)."""
import os
import re
import tempfile

import loft_it
import training_lib

caches = tempfile.mkdtemp(prefix="loft-it-poison-caches-")
ITER = int(os.environ.get("LOFT_POISON_ITER", "300"))
common = dict(honest=4, iterations=ITER, aggregation="mean", lr=0.05, eval_every=max(1, ITER // 10),
              cache_root=caches, policy="uniform", placement="{kind: shards, replication: 2}",
              training_extra=" lr_schedule: {kind: cosine},")


def late_accuracy(rows):
    """Mean test accuracy of the last three evaluations (training.csv)."""
    accs = [float(r["test_accuracy"]) for r in rows if r.get("test_accuracy")]
    return sum(accs[-3:]) / len(accs[-3:]) if accs else None


clean, clean_rows, _ = training_lib.run("poison-clean", byzantine="none", **common)
acc_clean = late_accuracy(clean_rows)
loft_it.log(f"clean: accuracy {acc_clean}, ledger {clean['ledger']}, poisoning {clean.get('poisoning')}")
assert acc_clean is not None, clean
assert clean["poisoning"]["samples"] == 0, clean["poisoning"]
assert clean["poisoning"]["distrusted_sources"] == [], clean["poisoning"]
assert clean["poisoning"]["manifest_samples"] == 60000, clean["poisoning"]

att, att_rows, out = training_lib.run("poison-attack", byzantine="poison_serve", **common)
acc_att = late_accuracy(att_rows)
p = att["poisoning"]
loft_it.log(f"poison_serve: accuracy {acc_att}, ledger {att['ledger']}, poisoning {p}")

# What the poisoner (node 4) served, per partition.
served, served_partitions = 0, []
with open(os.path.join(out, "logs", "agent-byz.log")) as f:
    for line in f:
        m = re.search(r"poison_serve: served (\d+) label-flipped records to node \d+ \(partition (\d+)\)", line)
        if m:
            served += int(m.group(1))
            served_partitions.append(int(m.group(2)))
refused = 0
for i in range(4):
    log = training_lib.agent_log(out, f"edge-{i}")
    for m in re.finditer(r"peer (\d+) served (\d+) samples that do not match the dataset manifest", log):
        assert m.group(1) == "4", f"edge-{i} accused node {m.group(1)}: {m.group(0)}"
        refused += int(m.group(2))
with open(os.path.join(out, "logs", "scheduler.log")) as f:
    sched_log = f.read()
m = re.search(r"DISTRUSTED: node 4 .* partitions after (\d+) \(iteration (\d+) on\)", sched_log)
loft_it.log(f"poisoner served {served} forged records in {len(served_partitions)} partitions "
            f"{sorted(set(served_partitions))[:20]}; requesters refused {refused}; scheduler counted "
            f"{p['samples']}; distrust: {m.group(0) if m else None}")
assert served > 0, "the poisoner served nothing: the test attacked nothing"
assert refused == served, f"{served} forged records served but {refused} refused"
assert p["samples"] == refused, (p, refused)
assert set(p["samples_by_peer"]) == {"4"}, p
assert "POISONING: node" in sched_log, "the scheduler did not log the report"
assert p["distrusted_sources"] == [4], p
assert m is not None, "the scheduler did not log the distrust of node 4"
last_before, from_iteration = int(m.group(1)), int(m.group(2))
late = [pid for pid in served_partitions if pid > last_before]
assert not late, f"node 4 served partitions planned after its distrust (after partition {last_before}): {late}"
assert from_iteration <= 5, f"node 4 distrusted only from iteration {from_iteration}"
# Refused samples were retried, nothing lost or double counted.
assert att["ledger"]["lost"] == 0 and att["ledger"]["duplicates"] == 0, att["ledger"]
assert att["training"]["hash_mismatches"] == 0, att["training"]
assert acc_att is not None and abs(acc_att - acc_clean) <= 0.01, \
    f"accuracy under poison_serve {acc_att} vs clean {acc_clean}: more than 1 point apart"
print("ok", acc_clean, acc_att, served)
