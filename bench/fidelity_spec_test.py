#!/usr/bin/env python3
"""bench/fidelity.py's synthetic specs: the testbed's request overhead is
written into a spec that sets none (flow and block `network:` forms, or
none), never over one the spec sets, and loft-sim accepts the result.

  python3 bench/fidelity_spec_test.py BIN_DIR
"""
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import fidelity  # noqa: E402

FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print("FAILED:", what)


def main():
    bindir = pathlib.Path(sys.argv[1])
    f = fidelity.with_request_overhead
    check(f("a: 1\n", 1.2) == "a: 1\nnetwork: {request_overhead_ms: 1.2}\n", "no network: appended")
    check("network: {request_overhead_ms: 1.2, burst_ms: 2}" in f("network: {burst_ms: 2}\n", 1.2),
          "flow network: merged")
    check("network:\n  request_overhead_ms: 1.2\n  burst_ms: 2" in f("network:\n  burst_ms: 2\n", 1.2),
          "block network: merged")
    kept = "network: {request_overhead_ms: 0.4}\n"
    check(f(kept, 1.2) == kept, "a spec's own request_overhead_ms is kept")
    check(f("a: 1\n", 0) == "a: 1\n", "0 writes nothing")
    spec = fidelity.synthetic((fidelity.CLUSTERS / "edge-bandwidth.yaml").read_text(), 1.2)
    check("model: none" in spec and "request_overhead_ms: 1.2" in spec, "synthetic edge-bandwidth")
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "spec.yaml"
        p.write_text(spec)
        r = subprocess.run([str(bindir / "loft-sim"), "run", str(p), "--policy", "loft", "--iterations", "3",
                            "--out", str(pathlib.Path(d) / "sim")], capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"loft-sim accepts the spec: {r.stderr.strip()}")
    print("fidelity_spec:", "FAILED" if FAILED else "ok")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
