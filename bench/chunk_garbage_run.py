#!/usr/bin/env python3
"""Six members, one replacing every chunk it reduces with garbage: does
training still learn, evict the attacker and finish?

The cluster of the training integration tests (tests/integration/
training_lib.py: five honest agents and one attacker, replication 1, the
60,000 Fashion-MNIST samples, global batch 512, `trimmed_mean`), run twice
with `loftctl cluster run`: the spec as written (the robust rule implies
`byzantine_tolerance: 1`) and with `byzantine_tolerance: 1` spelled out.
Prints one JSON object: per run the final test accuracy, the last
iteration, the ledger (samples lost to the eviction) and summary.json's
ring_detection. Usage: bench/chunk_garbage_run.py --bin build/bin"""
import argparse
import contextlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="directory with loftctl, loft-scheduler, loft-agent")
    ap.add_argument("--iterations", type=int, default=360)
    a = ap.parse_args()
    os.environ["LOFT_BIN_DIR"] = os.path.abspath(a.bin)
    import training_lib  # after LOFT_BIN_DIR: loft_it reads it

    result = {"iterations": a.iterations, "runs": {}}
    for name, extra in (("as_written", ""), ("byzantine_tolerance_1", " byzantine_tolerance: 1,")):
        with contextlib.redirect_stdout(sys.stderr):  # loftctl's tables: stdout is the JSON
            s, _, out = training_lib.run("chunk-garbage-" + name, honest=5, byzantine="chunk_garbage", scale=10,
                                         iterations=a.iterations, lr=0.05, aggregation="trimmed_mean",
                                         eval_every=60, batch=512, samples=60000, training_extra=extra,
                                         timeout_s=1800)
        st = training_lib.status(out)
        result["runs"][name] = {"final_accuracy": s["final_accuracy"], "last_iteration": st["iteration"],
                                "ledger": st["ledger"], "evicted_nodes": st.get("evicted_nodes"),
                                "ring_detection": s.get("ring_detection"),
                                "hash_mismatches": s["training"]["hash_mismatches"], "out": out}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
