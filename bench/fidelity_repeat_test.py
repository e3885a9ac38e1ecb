#!/usr/bin/env python3
"""bench/fidelity_repeat.py on hand-made fidelity results: an order every
run shows beyond the noise is established and checked against the
predictions; a pair whose sign changes between runs flips; a difference
inside the noise is unresolved; a wrong prediction of an established
order fails the scenario; bad input exits 2 naming what was wrong.

  python3 bench/fidelity_repeat_test.py
"""
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fidelity_repeat  # noqa: E402

FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print("FAILED:", what)


def run_doc(cases):
    """cases: {scenario: {policy: (real, se, predicted)}}"""
    return {"scenarios": {s: {"policies": {p: {"real_mean_iteration_ms": r, "real_se_mean_iteration_ms": se,
                                                "predicted_mean_iteration_ms": q}
                                            for p, (r, se, q) in ps.items()}}
                          for s, ps in cases.items()}}


def main():
    # Scenario "a": loft 20 ms below uniform in every run (se 1): established,
    # predicted right. lbbsp vs uniform: +3, -3, +2 (flips). "b": loft 0.5 ms
    # below uniform in every run with se 5: unresolved. "c": loft below
    # uniform beyond the noise, but one run's prediction has it above.
    runs = [
        {"a": {"uniform": (100, 1, 101), "lbbsp": (103, 1, 102), "loft": (80, 1, 85)},
         "b": {"uniform": (100, 5, 100), "loft": (99.5, 5, 99)},
         "c": {"uniform": (100, 1, 100), "loft": (90, 1, 95)}},
        {"a": {"uniform": (100, 1, 100), "lbbsp": (97, 1, 101), "loft": (81, 1, 84)},
         "b": {"uniform": (100, 5, 100), "loft": (99.4, 5, 99)},
         "c": {"uniform": (100, 1, 100), "loft": (91, 1, 101)}},
        {"a": {"uniform": (100, 1, 100), "lbbsp": (102, 1, 101), "loft": (79, 1, 86)},
         "b": {"uniform": (100, 5, 100), "loft": (99.6, 5, 99)},
         "c": {"uniform": (100, 1, 100), "loft": (90, 1, 96)}},
    ]
    docs = [(f"run{i}", run_doc(r)) for i, r in enumerate(runs)]
    out = fidelity_repeat.judge(docs)
    a = out["scenarios"]["a"]
    check(a["pairs"]["loft vs uniform"]["real"] == "established", "a: loft < uniform established")
    check(a["pairs"]["loft vs uniform"]["agrees"] is True, "a: predicted loft < uniform in every run")
    check(a["pairs"]["lbbsp vs uniform"]["real"] == "flips", "a: lbbsp vs uniform flips")
    check("agrees" not in a["pairs"]["lbbsp vs uniform"], "a: a flipping pair is not judged")
    check(a["flipping"] == ["lbbsp vs uniform"], "a: flipping pairs listed")
    check(a["ranking_agrees"] is True and a["established"] == 2, "a: ranking agrees on 2 established pairs")
    b = out["scenarios"]["b"]
    check(b["pairs"]["loft vs uniform"]["real"] == "unresolved", "b: a difference inside the noise is unresolved")
    check(b["established"] == 0 and b["ranking_agrees"] is True, "b: nothing established, nothing to disagree with")
    c = out["scenarios"]["c"]
    check(c["pairs"]["loft vs uniform"]["real"] == "established", "c: established")
    check(c["pairs"]["loft vs uniform"]["agrees"] is False, "c: one run predicts the wrong order")
    check(c["ranking_agrees"] is False, "c: the scenario's ranking does not agree")
    check(out["established_pairs"] == 3 and out["established_pairs_agreeing"] == 2, "totals")
    check(out["scenarios_agreeing"] == 2 and out["scenarios_judged"] == 3, "scenario totals")
    # The spread between runs counts: -20 and -2 ms with se 0.1 is not established.
    v = fidelity_repeat.pair_verdict([(80, 0.1, 100, 0.1, 0, 1), (98, 0.1, 100, 0.1, 0, 1)])
    check(v["real"] == "unresolved", "a large spread between runs keeps an order unresolved")
    # A scenario in one run only, or with different policies, is not judged.
    out = fidelity_repeat.judge([("r0", run_doc({"a": runs[0]["a"], "x": runs[0]["b"]})),
                                 ("r1", run_doc({"a": runs[1]["a"]}))])
    check("x" in out["not_judged"] and "x" not in out["scenarios"], "a scenario in one run is not judged")
    out = fidelity_repeat.judge([("r0", run_doc({"a": runs[0]["a"]})), ("r1", run_doc({"a": runs[1]["c"]}))])
    check("different policies" in out["not_judged"].get("a", ""), "different policies are not judged")

    tool = [sys.executable, str(HERE / "fidelity_repeat.py")]
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, r in enumerate(runs):
            p = pathlib.Path(d) / f"run{i}.json"
            p.write_text(json.dumps(run_doc(r)))
            paths.append(str(p))
        r = subprocess.run(tool + paths, capture_output=True, text=True)
        check(r.returncode == 0 and json.loads(r.stdout)["established_pairs"] == 3, "CLI prints the JSON")
        missing = str(pathlib.Path(d) / "nope.json")
        r = subprocess.run(tool + [paths[0], missing], capture_output=True, text=True)
        check(r.returncode == 2 and "nope.json" in r.stderr and "cannot read" in r.stderr, "missing file named")
        bad = pathlib.Path(d) / "bad.json"
        bad.write_text(json.dumps({"results": []}))
        r = subprocess.run(tool + [paths[0], str(bad)], capture_output=True, text=True)
        check(r.returncode == 2 and "bad.json" in r.stderr and "scenarios" in r.stderr, "wrong document named")
        nose = run_doc(runs[1])
        del nose["scenarios"]["a"]["policies"]["loft"]["real_se_mean_iteration_ms"]
        p = pathlib.Path(d) / "nose.json"
        p.write_text(json.dumps(nose))
        r = subprocess.run(tool + [paths[0], str(p)], capture_output=True, text=True)
        check(r.returncode == 2 and "real_se_mean_iteration_ms" in r.stderr and "loft" in r.stderr,
              "a missing standard error is named with its scenario and policy")
        r = subprocess.run(tool + [paths[0]], capture_output=True, text=True)
        check(r.returncode == 2, "one run is not enough")
    if FAILED:
        print(f"{len(FAILED)} check(s) failed")
        return 1
    print("fidelity_repeat: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
