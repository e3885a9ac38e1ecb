"""Evicting a Byzantine holder does not halt training (black-box): six
agents, trimmed_mean with `byzantine_tolerance: 1`, one member (node 5,
"byz") replacing every chunk it reduces with garbage, replication 1 (the
samples of byz's shard are on byz alone), 6,000 samples, 256 a batch: an
epoch is about 23 iterations, the run 60.

The ring detects the attacker and the scheduler evicts it. An evicted node
never comes back, so the unconsumed samples of its shard are left out as
unavailable (in every later epoch too): the run completes all its
iterations, epochs keep completing without byz's shard, the status says how
many sample-epochs were lost to the eviction (ledger.lost_to_eviction,
counted in ledger.unavailable; evicted_nodes [5]) and the model learns.
Before the fix planning stopped at the end of the first epoch ("epoch 0: N
unconsumed samples are held only by dead nodes; waiting for a holder to come
back") and no iteration ran again: the run timed out.
"""
import loft_it
import training_lib

ITER = 60
SHARD = 1000  # 6000 samples on 6 nodes, replication 1
s, _, out = training_lib.run("evict", honest=5, byzantine="chunk_garbage", scale=10, iterations=ITER, lr=0.05,
                             aggregation="trimmed_mean", eval_every=30, batch=256, samples=6000,
                             training_extra=" byzantine_tolerance: 1,", timeout_s=180)
st = training_lib.status(out)
l = st["ledger"]
rd = s["ring_detection"]
acc = s["final_accuracy"]
loft_it.log(f"final accuracy {acc}; ledger {l}; evicted {st.get('evicted_nodes')}; ring_detection {rd}")
assert rd["evicted"] == [5], f"the attacker was not evicted: {rd}"
assert st["iteration"] == ITER - 1, f"the run stopped at iteration {st['iteration']} of {ITER}"
assert st.get("evicted_nodes") == [5], st.get("evicted_nodes")
# What byz had not trained when it was evicted is lost in epoch 0, its whole
# shard in every later epoch.
E = l["epochs_completed"]
assert E >= 2, f"epochs stopped completing after the eviction: {l}"
assert l["lost_to_eviction"] >= 1 + (E - 1) * SHARD, l
assert l["unavailable"] >= l["lost_to_eviction"], l
assert l["duplicates"] == 0 and l["lost"] == 0, l
assert "EVICTED: node 5 (byz) never comes back" in training_lib.scheduler_log(out)
assert s["training"]["hash_mismatches"] == 0, s["training"]
assert acc is not None and acc >= 0.6, f"accuracy {acc}"
print("ok", acc, l["lost_to_eviction"])
