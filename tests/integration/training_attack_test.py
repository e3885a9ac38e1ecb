"""Attacks on the ring itself, each next to the clean
baseline of the same cluster (6 agents, median, byzantine_tolerance 1,
shared caches, every sample on two nodes so that the evicted attacker's
share stays readable): a member replacing its reduced chunk with garbage or a
scaled copy, and a member announcing rounds nobody planned (one near, one
2^31 ahead). Each attack: training completes, every reporting agent holds
the same parameters, accuracy within 2 points of clean, and the attacker is
detected (honest agents log and report it, the scheduler evicts it, and
summary.json `ring_detection` counts the offences by kind, the reports and
the eviction; zero of each in the clean run)."""
import os
import tempfile

import loft_it
import training_lib

caches = tempfile.mkdtemp(prefix="loft-it-attack-caches-")
ITER = 200
COMMON = dict(honest=5, iterations=ITER, lr=0.05, aggregation="median", eval_every=100, cache_root=caches,
              placement="{kind: shards, replication: 2}",
              training_extra=" byzantine_tolerance: 1,")


def scheduler_log(out):
    logs = os.path.join(out, "logs")
    text = ""
    for name in sorted(os.listdir(logs)):
        if not name.startswith("agent-"):
            with open(os.path.join(logs, name)) as f:
                text += f.read()
    return text


clean, _, _ = training_lib.run("attack-clean", byzantine="none", scale=1, **COMMON)
acc_clean = clean["final_accuracy"]
loft_it.log(f"clean: final accuracy {acc_clean}, {clean['training']}")
assert acc_clean is not None and acc_clean >= 0.70, f"clean baseline accuracy {acc_clean}"
# summary.json ring_detection (scheduler/ring_detection.h): nothing seen in a clean run.
rd = clean["ring_detection"]
assert rd["offences"] == 0 and rd["reports"] == 0 and rd["evictions"] == 0, rd

for kind, scale, reason in (("chunk_garbage", 10, "chunk_mismatch"), ("chunk_scale", 25, "chunk_mismatch"),
                            ("phantom_round", 1, "out_of_window")):
    s, _, out = training_lib.run(f"attack-{kind}", byzantine=kind, scale=scale, **COMMON)
    acc = s["final_accuracy"]
    honest_logs = "".join(training_lib.agent_log(out, f"edge-{i}") for i in range(5))
    reports = honest_logs.count(f"ring: node 5 sent {reason}")
    evicted = "evicting node byz" in scheduler_log(out)
    loft_it.log(f"{kind}: final accuracy {acc} (clean {acc_clean}), {s['training']}, "
                f"{reports} reports by honest agents, evicted {evicted}")
    assert s["training"]["hash_mismatches"] == 0, s["training"]
    assert acc is not None and acc >= acc_clean - 0.02, f"{kind}: accuracy {acc} vs clean {acc_clean}"
    assert reports >= 2, f"{kind}: the attacker was reported {reports} times"
    assert evicted, f"{kind}: the scheduler did not evict the attacker"
    # The same detection in summary.json: offences of this kind by node 5,
    # the reports that led to the eviction, the eviction.
    rd = s["ring_detection"]
    loft_it.log(f"{kind}: ring_detection {rd}")
    assert rd["offences_by_reason"][reason] >= 8, rd  # an agent reports at its 8th offence
    assert rd["offences_by_node"].get("5", 0) >= rd["offences_by_reason"][reason], rd
    assert rd["reports"] >= 2 and rd["reports_by_reason"].get(reason, 0) >= 1, rd
    assert rd["evictions"] == 1 and rd["evicted"] == [5], rd
print("ok", acc_clean)
