"""An agent SIGKILLed mid-run and restarted by
`loftctl cluster run` (the spec's `failures`) rejoins with the job's
current parameters, optimizer state and round (state transfer from a live
peer over the CURVE-authenticated ring), so every agent holds identical
parameters after every iteration, including the restarted one. The run uses
CURVE (no --insecure) and a step learning-rate schedule whose decay comes
after the rejoin, so a wrong optimizer step count after the transfer would
show as a hash mismatch too."""
import re

import loft_it
import training_lib

ITER = 300
summary, rows, out = training_lib.run(
    "rejoin", honest=3, iterations=ITER, aggregation="mean", lr=0.05, eval_every=60, insecure=False,
    extra_nodes=training_lib.FLAKY.format(at_s=4, down_s=2), placement="{kind: shards, replication: 2}",
    training_extra=" lr_schedule: {kind: step, step_every: 150, gamma: 0.5},", timeout_s=300)
st = training_lib.status(out)
tr = st["training"]
its = {e["iteration"]: e for e in tr["iterations"]}
log = training_lib.agent_log(out, "flaky")
loft_it.log(f"training: mismatches {tr['hash_mismatches']}, final accuracy {tr['final_accuracy']}")

# The agent was really killed and restarted, and took the state of a live peer.
assert log.count("registered as node") >= 2, "flaky never re-registered"
m = re.search(r"state transfer: took round (\d+) \(hash ([0-9a-f]+), optimizer step (\d+)\) from node (\d+)", log)
assert m, "the restarted agent did not fetch the job's state:\n" + log[-3000:]
took = int(m.group(1))
assert 0 < took < ITER - 100, f"state transfer at round {took}: the failure did not happen mid-run"
# One optimizer step per round 0..took that was all-reduced (a round whose
# partitions all failed, e.g. reading from the dead node, has none).
assert took - 10 <= int(m.group(3)) <= took + 1, m.group(0)
assert m.group(2) == its[took]["param_hash"], (m.group(0), its[took])
assert all("(CURVE)" in training_lib.agent_log(out, n) for n in ("edge-0", "edge-1", "edge-2", "flaky"))

# Identical parameters on every reporting agent in every iteration, and the
# restarted agent reports in (nearly) every iteration after the transfer.
assert tr["hash_mismatches"] == 0, [e for e in tr["iterations"] if not e["hashes_equal"]][:5]
after = [its[i] for i in range(took + 1, ITER) if i in its]
assert len(after) >= ITER - took - 5, len(after)
full = sum(1 for e in after if e["workers"] >= 4)
assert full >= 0.9 * len(after), f"only {full} of {len(after)} iterations after the rejoin had 4 reports"
assert summary["ledger"]["lost"] == 0 and summary["ledger"]["duplicates"] == 0, summary["ledger"]
acc = summary["final_accuracy"]
assert acc is not None and acc >= 0.80, f"final accuracy {acc}"
print("ok: state transfer at round", took, "final accuracy", acc, "iterations after rejoin with 4 reports",
      full, "/", len(after))
