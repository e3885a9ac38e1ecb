"""A live agent with no samples in an iteration still takes
part in the all-reduce with weight 0 (it is absent for every reducer).
Four agents, global batch 3, min_batch 0: every iteration one agent gets no
partition. The run must not stall, every reporting agent holds the same
parameters after every iteration, the idle agent joins every round, and the
model learns."""
import loft_it
import training_lib

ITER = 100
for aggregation in ("mean",):  # the reducers' zero-weight rule is unit-tested for all of them
    summary, rows, out = training_lib.run(f"zero-{aggregation}", honest=4, iterations=ITER,
                                          aggregation=aggregation, lr=0.05, batch=3, min_batch=0,
                                          model="softmax", eval_every=50, timeout_s=300)
    st = training_lib.status(out)
    tr = st["training"]
    workers = [e["workers"] for e in tr["iterations"]]
    joins = sum(training_lib.agent_log(out, f"edge-{i}").count("joining with weight 0") for i in range(4))
    loft_it.log(f"{aggregation}: {joins} weight-0 joins, mismatches {tr['hash_mismatches']}, "
                f"final accuracy {tr['final_accuracy']}, mean iteration {st['run']['mean_iteration_ms']:.0f} ms")
    assert len(workers) == ITER, len(workers)
    assert max(workers) == 3, workers  # one live agent had no partition in every iteration
    assert joins >= ITER - 2, f"only {joins} weight-0 joins for {ITER} iterations"
    assert tr["hash_mismatches"] == 0, [e for e in tr["iterations"] if not e["hashes_equal"]][:5]
    acc = summary["final_accuracy"]
    assert acc is not None and acc >= 0.45, f"{aggregation}: final accuracy {acc} (the model did not learn)"
print("ok")
