#!/usr/bin/env python3
"""bench-smoke: run one benchmark with its smallest arguments and check it
still works: exit status 0 and a JSON object on stdout (ctest label
`bench-smoke`, bench/bench_smoke.cmake). Not a measurement: figures are
not looked at.

  smoke_check.py [--needs-module M] -- COMMAND [ARGS...]

--needs-module M: exit 77 (ctest: skipped) when Python module M is not
importable by the benchmark's interpreter (the command's first word when it
is a python): the torch bench without PyTorch installed.
"""
import importlib.util
import json
import os
import subprocess
import sys


def has_module(name, cmd):
    """Whether the benchmark's interpreter (the command's first word when it
    is a python, this one otherwise) can import module `name`."""
    if os.path.basename(cmd[0]).startswith("python"):
        return subprocess.run([cmd[0], "-c", f"import {name}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0
    return importlib.util.find_spec(name) is not None


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: smoke_check.py [--needs-module M] -- COMMAND [ARGS...]")
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1:]
    if not cmd:
        sys.exit("smoke_check.py: no command after --")
    i = 0
    while i < len(opts):
        if opts[i] == "--needs-module" and i + 1 < len(opts):
            if not has_module(opts[i + 1], cmd):
                print(f"skipped: Python module {opts[i + 1]} is not installed for {cmd[0]}")
                sys.exit(77)
            i += 2
        else:
            sys.exit(f"smoke_check.py: unknown option {opts[i]}")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        sys.exit(f"{' '.join(cmd)}: exit status {r.returncode}")
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        sys.stderr.write(r.stdout[-2000:] + "\n" + r.stderr[-2000:])
        sys.exit(f"{' '.join(cmd)}: stdout is not valid JSON ({e})")
    if not isinstance(doc, dict) or not doc:
        sys.exit(f"{' '.join(cmd)}: stdout is JSON but not a non-empty object")
    print(f"ok: {' '.join(cmd)}: {len(doc)} top-level keys")


if __name__ == "__main__":
    main()
