#!/usr/bin/env python3
"""Policy rankings across repeated fidelity runs: does loft-sim predict the
same policy ranking as the real runs in every scenario?

One run of bench/fidelity.py ranks the policies by their real mean
iteration; two policies whose means differ by less than that run's noise
are tied (fidelity.py "Ranking agreement and ties"). A single run's noise
understates how much a real order moves between runs on a shared machine,
so this tool takes several runs of the same scenarios (each a JSON
document fidelity.py printed; `--reuse` redoes the predictions of older
real runs with the current loft-sim) and asks, per scenario and pair of
policies a, b:

- real: the difference real_a − real_b in each run, and that run's noise
  2·sqrt(se_a² + se_b²);
- ESTABLISHED (a real order): the difference has the same sign in every
  run, and its mean over the runs is at least twice the larger of two
  standard errors: the runs' own (sqrt(Σ se_i²) / k, se_i the run's
  noise / 2) and the spread between runs (their standard deviation / √k);
- FLIPS: the sign differs between runs (never established);
- otherwise the pair is unresolved (same sign, within the noise);
- predicted: the sign of predicted_a − predicted_b in each run (each run
  has its own calibration); `agrees` when every run predicts the
  established order.

A scenario's ranking agrees when every established pair agrees. It needs
the scenario in at least two runs with the same policies; otherwise it is
listed under `not_judged`, with the reason.

  python3 bench/fidelity_repeat.py RUN1.json RUN2.json [RUN3.json ...]

Prints one JSON document; exits 0 when it could judge, 2 on bad input
(a missing file, a document that is not fidelity.py's, a scenario without
standard errors) naming what was wrong.
"""
import itertools
import json
import math
import sys


class BadInput(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror}")
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not JSON: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("scenarios"), dict):
        raise BadInput(f"{path}: no \"scenarios\" object (not a bench/fidelity.py result?)")
    return doc


def case(path, scenario, policy, c):
    out = {}
    for key in ("real_mean_iteration_ms", "predicted_mean_iteration_ms", "real_se_mean_iteration_ms"):
        v = c.get(key) if isinstance(c, dict) else None
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            raise BadInput(f"{path}: scenario {scenario}, policy {policy}: {key} missing or not a number "
                           "(runs of fewer than 20 iterations have no standard error)")
        out[key] = float(v)
    return out


def pair_verdict(runs):
    """runs: per run (real_a, se_a, real_b, se_b, pred_a, pred_b)."""
    k = len(runs)
    diffs = [ra - rb for ra, _, rb, _, _, _ in runs]
    ses = [math.sqrt(sa ** 2 + sb ** 2) for _, sa, _, sb, _, _ in runs]
    preds = [pa - pb for _, _, _, _, pa, pb in runs]
    mean = sum(diffs) / k
    within = math.sqrt(sum(s ** 2 for s in ses)) / k
    between = (math.sqrt(sum((d - mean) ** 2 for d in diffs) / (k - 1)) / math.sqrt(k)) if k > 1 else 0.0
    signs = {(d > 0) - (d < 0) for d in diffs}
    if len(signs) > 1:
        real = "flips"
    elif abs(mean) >= 2 * max(within, between) and mean != 0:
        real = "established"
    else:
        real = "unresolved"
    out = {"real_diff_ms": diffs, "real_noise_ms": [2 * s for s in ses], "mean_real_diff_ms": mean,
           "se_within_ms": within, "se_between_ms": between, "real": real, "predicted_diff_ms": preds}
    if real == "established":
        want = mean < 0
        out["agrees"] = all((p < 0) == want and p != 0 for p in preds)
    return out


def judge(docs):
    """docs: list of (path, document). Returns the JSON result."""
    names = sorted({s for _, d in docs for s in d["scenarios"]})
    scenarios, not_judged = {}, {}
    for s in names:
        present = [(p, d["scenarios"][s]) for p, d in docs if s in d["scenarios"]]
        if len(present) < 2:
            not_judged[s] = f"in {len(present)} run(s); needs 2"
            continue
        policy_sets = {tuple(sorted(sc.get("policies", {}))) for _, sc in present}
        if len(policy_sets) != 1:
            not_judged[s] = "the runs ran different policies: " + "; ".join(",".join(x) for x in sorted(policy_sets))
            continue
        policies = list(next(iter(policy_sets)))
        cases = [{p: case(path, s, p, sc["policies"][p]) for p in policies} for path, sc in present]
        pairs = {}
        for a, b in itertools.combinations(policies, 2):
            pairs[f"{a} vs {b}"] = pair_verdict(
                [(c[a]["real_mean_iteration_ms"], c[a]["real_se_mean_iteration_ms"], c[b]["real_mean_iteration_ms"],
                  c[b]["real_se_mean_iteration_ms"], c[a]["predicted_mean_iteration_ms"],
                  c[b]["predicted_mean_iteration_ms"]) for c in cases])
        est = [v for v in pairs.values() if v["real"] == "established"]
        scenarios[s] = {"runs": len(present), "pairs": pairs,
                        "established": len(est), "established_agreeing": sum(v["agrees"] for v in est),
                        "flipping": [k for k, v in pairs.items() if v["real"] == "flips"],
                        "ranking_agrees": all(v["agrees"] for v in est)}
    est = sum(v["established"] for v in scenarios.values())
    agree = sum(v["established_agreeing"] for v in scenarios.values())
    return {"runs": [p for p, _ in docs],
            "rule": "a pair's real order is established when its sign is the same in every run and its mean "
                    "difference is at least 2 standard errors (the larger of the runs' own and the spread "
                    "between runs); a scenario's ranking agrees when every run's prediction has every "
                    "established order",
            "scenarios": scenarios, "not_judged": not_judged,
            "established_pairs": est, "established_pairs_agreeing": agree,
            "scenarios_agreeing": sum(v["ranking_agrees"] for v in scenarios.values()),
            "scenarios_judged": len(scenarios)}


def main(argv):
    if len(argv) < 3 or any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        result = judge([(p, load(p)) for p in argv[1:]])
    except BadInput as e:
        print(f"fidelity_repeat: {e}", file=sys.stderr)
        return 2
    if not result["scenarios"]:
        print("fidelity_repeat: no scenario is in two runs with the same policies: "
              + "; ".join(f"{k}: {v}" for k, v in result["not_judged"].items()), file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
