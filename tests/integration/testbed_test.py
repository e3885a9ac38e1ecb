"""Testbed integration tests (docs/testbed.md): root, network namespaces,
veth, bridge, tbf and a cpu cgroup controller. Without them each test
prints why and exits 77 (ctest SKIP_RETURN_CODE), never passes silently.

  testbed_test.py link_rate   a 10 Mbit/s up link and a 20 Mbit/s down link
                              deliver their rate +-10% (real TCP transfers)
  testbed_test.py priority    on a 10 Mbit/s uplink filled by a bulk transfer,
                              round trips marked low delay (IP TOS 0x10, as
                              the agents mark requests) skip the queue that
                              unmarked ones wait in
  testbed_test.py cpu_quota   a process in a node with cpu_cores: 0.25 gets
                              25% +-5% of a core under a busy loop
  testbed_test.py killed_run  kill -9 of `loftctl cluster run --testbed`, then
                              `loftctl testbed down SPEC`: nothing left; Ctrl-C
                              of a run cleans up by itself
  testbed_test.py smoke       `loftctl cluster run edge-bandwidth.yaml
                              --testbed` for a few iterations
  testbed_test.py clean       kill -9 of a run leaves its testbed; `loftctl testbed
                              clean` removes every lft name, process and cgroup and
                              the root cgroup's controllers are as before; a second
                              clean finds nothing; the next `cluster run --testbed`
                              removes a killed run's leftovers itself, saying so
  testbed_test.py signals     SIGHUP and SIGQUIT of a run clean up like Ctrl-C
  testbed_test.py tool_path   `ip` and `tc` planted first in PATH are never run
                              (testbed check, up, down)
  testbed_test.py daemon_user the scheduler and agents of a testbed run run as
                              nobody (/proc/PID/status Uid), still under their CPU
                              quota and tbf, and the run completes
"""
import csv
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import loft_it

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "../.."))
CGROUP_ROOTS = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"]

TWO_NODES = """dataset: {name: fashion-mnist, samples: 4000, sample_bytes: 784}
training: {global_batch: 256, min_batch: 8, iterations: 32, model: none}
nodes:
  - name: a
    compute: {fixed_ms: 1.0, per_sample_ms: 0.02, cpu_cores: 0.25}
    link: {up_mbps: 10, down_mbps: 100, latency_ms: 1}
  - name: b
    compute: {fixed_ms: 1.0, per_sample_ms: 0.02}
    link: {up_mbps: 100, down_mbps: 20, latency_ms: 1}
"""

# Receives one TCP connection; prints the rate (Mbit/s) after 1 s of warm-up
# (tbf burst, TCP slow start).
RX = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
t0 = None; marks = []; n = 0
while True:
    b = c.recv(1 << 16)
    if not b: break
    now = time.monotonic()
    if t0 is None: t0 = now
    n += len(b); marks.append((now - t0, n))
w = [m for m in marks if m[0] >= 1.0]
print((w[-1][1] - w[0][1]) * 8 / (w[-1][0] - w[0][0]) / 1e6, flush=True)
"""
TX = r"""
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
buf = b"x" * 65536; end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end: c.sendall(buf)
c.close()
"""
# Echoes each message back (one connection at a time).
ECHO = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(4)
print("listening", flush=True)
while True:
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(64)
        if not b: break
        c.sendall(b)
"""
# Median round trip (ms) of 64-byte messages on a connection with IP TOS argv[3].
PING = r"""
import socket, statistics, sys, time
c = socket.socket(); c.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, int(sys.argv[3]))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); c.connect((sys.argv[1], int(sys.argv[2])))
rtts = []
for _ in range(15):
    t0 = time.monotonic(); c.sendall(b"p" * 64); n = 0
    while n < 64: n += len(c.recv(64 - n))
    rtts.append((time.monotonic() - t0) * 1e3); time.sleep(0.02)
print(statistics.median(rtts), flush=True)
"""
# Bulk: argv[3] connections sending for argv[4] s (the kernel keeps only a
# few packets of each TCP flow in a local qdisc, so one flow barely queues).
MULTI_TX = r"""
import socket, sys, threading, time
end = time.monotonic() + float(sys.argv[4])
def send():
    c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); buf = b"x" * 65536
    while time.monotonic() < end: c.sendall(buf)
    c.close()
ts = [threading.Thread(target=send) for _ in range(int(sys.argv[3]))]
for x in ts: x.start()
for x in ts: x.join()
"""
# Accepts any number of connections; prints Mbit/s received after 1 s.
SINK = r"""
import selectors, socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(64); print("listening", flush=True)
sel = selectors.DefaultSelector(); sel.register(s, selectors.EVENT_READ)
t0 = None; n = 0; n1 = None; t1 = None; last = None; open_ = 0; seen = 0
while seen == 0 or open_ > 0:
    for key, _ in sel.select():
        if key.fileobj is s:
            c, _ = s.accept(); sel.register(c, selectors.EVENT_READ); open_ += 1; seen += 1; continue
        b = key.fileobj.recv(1 << 16)
        if not b:
            sel.unregister(key.fileobj); key.fileobj.close(); open_ -= 1; continue
        now = time.monotonic(); t0 = t0 or now; n += len(b); last = now
        if n1 is None and now - t0 >= 1.0: n1, t1 = n, now
print((n - n1) * 8 / (last - t1) / 1e6, flush=True)
"""
# Busy loop; prints CPU time / wall time.
BUSY = r"""
import os, sys, time
dur = float(sys.argv[1]); t0 = time.monotonic(); c0 = os.times(); x = 0
while time.monotonic() - t0 < dur: x += 1
c1 = os.times()
print((c1.user + c1.system - c0.user - c0.system) / (time.monotonic() - t0), flush=True)
"""


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def loftctl(*args, check=True, timeout=120):
    r = subprocess.run([loft_it.exe("loftctl"), *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        sys.exit(f"loftctl {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def require_support():
    if os.geteuid() != 0:
        skip("the testbed needs root (network namespaces, veth, tbf, cgroups); running as uid "
             f"{os.geteuid()}")
    r = loftctl("testbed", "check", check=False)
    if r.returncode != 0:
        skip(r.stderr.strip())


def up(spec):
    """`loftctl testbed up SPEC` -> the state JSON. Skips if the kernel lacks a feature."""
    r = loftctl("testbed", "up", spec, check=False)
    if r.returncode != 0:
        if "needs network namespaces, veth, bridge and the tbf" in r.stderr:
            skip(r.stderr.strip())
        sys.exit(f"testbed up failed:\n{r.stderr}")
    with open(r.stdout.strip()) as f:
        return json.load(f)


def leftovers(tag):
    """Names on this machine that start with the testbed's tag."""
    out = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out += [f"netns {l.split()[0]}" for l in netns.splitlines() if l.startswith(tag)]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for l in links.splitlines():
        name = l.split(": ")[1].split("@")[0]
        if name.startswith(tag):
            out.append(f"link {name}")
    for root in CGROUP_ROOTS:
        if os.path.isdir(os.path.join(root, tag)):
            out.append(f"cgroup {root}/{tag}")
    if os.path.exists(f"/run/loft-testbed/{tag}.json"):
        out.append("state file")
    return out


def tmpdir(prefix):
    """A temp dir the testbed's daemons (user nobody) can reach: mkdtemp's is 0700."""
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o755)
    return d


def write(tmp, name, text):
    p = os.path.join(tmp, name)
    with open(p, "w") as f:
        f.write(text)
    return p


def in_node(state, i, argv, cgroup=True):
    n = state["nodes"][i]
    wrap = [loft_it.exe("loftctl"), "testbed", "exec", "--netns", n["netns"]]
    if cgroup:
        wrap += ["--cgroup", n["cgroup"]]
    return wrap + ["--", *argv]


def measure(state, rx_node, tx_node, port, seconds=4.0):
    """Mbit/s from tx_node (None = the root namespace) to rx_node."""
    tmp = tmpdir("loft-tb-rate-")
    rx_py, tx_py = write(tmp, "rx.py", RX), write(tmp, "tx.py", TX)
    ip = state["nodes"][rx_node]["ip"]
    rx = subprocess.Popen(in_node(state, rx_node, [sys.executable, rx_py, ip, str(port)], cgroup=False),
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "listening"
    tx_argv = [sys.executable, tx_py, ip, str(port), str(seconds)]
    if tx_node is not None:
        tx_argv = in_node(state, tx_node, tx_argv, cgroup=False)
    subprocess.run(tx_argv, check=True, timeout=seconds + 30)
    out, _ = rx.communicate(timeout=30)
    return float(out.strip())


def test_link_rate():
    require_support()
    tmp = tmpdir("loft-tb-link-")
    spec = write(tmp, "two.yaml", TWO_NODES)
    st = up(spec)
    tag = st["tag"]
    try:
        up_rate = measure(st, rx_node=1, tx_node=0, port=5101)  # a's up_mbps 10 (b's down is 20)
        down_rate = measure(st, rx_node=1, tx_node=None, port=5102)  # b's down_mbps 20, from the root ns
        fast = measure(st, rx_node=0, tx_node=1, port=5103)  # b up 100, a down 100
        print(f"a -> b: {up_rate:.2f} Mbit/s (a.up_mbps 10); root -> b: {down_rate:.2f} Mbit/s "
              f"(b.down_mbps 20); b -> a: {fast:.2f} Mbit/s (100/100); load {os.getloadavg()}")
        assert abs(up_rate - 10) <= 1.0, f"10 Mbit/s up link delivered {up_rate:.2f} Mbit/s"
        assert abs(down_rate - 20) <= 2.0, f"20 Mbit/s down link delivered {down_rate:.2f} Mbit/s"
        assert fast > 40, f"the 100 Mbit/s path delivered only {fast:.2f} Mbit/s"
    finally:
        loftctl("testbed", "down", spec)
    assert leftovers(tag) == [], leftovers(tag)


def test_priority():
    require_support()
    tmp = tmpdir("loft-tb-prio-")
    spec = write(tmp, "two.yaml", TWO_NODES)
    echo_py, ping_py = write(tmp, "echo.py", ECHO), write(tmp, "ping.py", PING)
    rx_py, tx_py = write(tmp, "sink.py", SINK), write(tmp, "multi_tx.py", MULTI_TX)
    st = up(spec)
    tag = st["tag"]
    procs = []
    try:
        ip_b = st["nodes"][1]["ip"]
        echo = subprocess.Popen(in_node(st, 1, [sys.executable, echo_py, ip_b, "5201"], cgroup=False),
                                stdout=subprocess.PIPE, text=True)
        procs.append(echo)
        assert echo.stdout.readline().strip() == "listening"
        rx = subprocess.Popen(in_node(st, 1, [sys.executable, rx_py, ip_b, "5202"], cgroup=False),
                              stdout=subprocess.PIPE, text=True)
        procs.append(rx)
        assert rx.stdout.readline().strip() == "listening"
        # a -> b: 8 flows fill a's 10 Mbit/s uplink for 6 s; the round trips start after 1.5 s.
        tx = subprocess.Popen(in_node(st, 0, [sys.executable, tx_py, ip_b, "5202", "8", "6"], cgroup=False))
        procs.append(tx)
        time.sleep(1.5)

        def ping(tos):
            r = subprocess.run(in_node(st, 0, [sys.executable, ping_py, ip_b, "5201", str(tos)], cgroup=False),
                               capture_output=True, text=True, timeout=60, check=True)
            return float(r.stdout.strip())

        marked, unmarked = ping(0x10), ping(0)
        tx.wait(timeout=60)
        rate = float(rx.communicate(timeout=30)[0].strip())
        print(f"behind a bulk transfer at {rate:.2f} Mbit/s: median round trip {marked:.2f} ms marked low "
              f"delay, {unmarked:.2f} ms unmarked; load {os.getloadavg()}", flush=True)
        assert rate > 8, f"the bulk transfer ran at {rate:.2f} Mbit/s: the uplink was not full"
        # The eight flows keep tens of ms of the rate queued: an unmarked
        # message waits behind them, a marked one only behind the frame on
        # the wire.
        assert unmarked > 20, f"unmarked round trips took {unmarked:.2f} ms: no queue to skip?"
        assert marked < unmarked / 3, (
            f"low-delay round trips took {marked:.2f} ms against {unmarked:.2f} ms unmarked: "
            "the uplink's queue does not put them first")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        loftctl("testbed", "down", spec)
    assert leftovers(tag) == [], leftovers(tag)


def test_cpu_quota():
    require_support()
    tmp = tmpdir("loft-tb-cpu-")
    spec = write(tmp, "two.yaml", TWO_NODES)
    busy = write(tmp, "busy.py", BUSY)
    st = up(spec)
    tag = st["tag"]
    try:
        with open(os.path.join(st["nodes"][0]["cgroup"], "cpu.cfs_quota_us" if not st["cgroup_v2"]
                               else "cpu.max")) as f:
            print("quota:", f.read().strip())
        # The quota is a ceiling: the capped process must never get more
        # than 30% of a core. It gets its 25% only if the machine has that to
        # give, so an uncapped busy loop runs alongside as a control; a
        # low reading counts only when the control shows the CPU was there.
        for attempt in range(3):
            capped = subprocess.Popen(in_node(st, 0, [sys.executable, busy, "5"]), stdout=subprocess.PIPE,
                                      text=True)
            control = subprocess.run([sys.executable, busy, "5"], capture_output=True, text=True, check=True)
            share = float(capped.communicate(timeout=60)[0])
            free = float(control.stdout)
            print(f"attempt {attempt}: cpu_cores 0.25 -> {share:.3f} of a core; uncapped control "
                  f"{free:.3f}; load {os.getloadavg()}", flush=True)
            assert share <= 0.30, f"cpu_cores 0.25 got {share:.3f} of a core (quota not enforced)"
            if share >= 0.20:
                return
            if free >= 0.35:
                sys.exit(f"cpu_cores 0.25 got {share:.3f} of a core while an uncapped loop got {free:.3f}")
        skip(f"the machine is too loaded to give 25% of a core (uncapped control got {free:.3f})")
    finally:
        loftctl("testbed", "down", spec)
        assert leftovers(tag) == [], leftovers(tag)


def state_file_of(pid):
    """The state JSON of the testbed owned by loftctl `pid`, or None yet."""
    for p in glob.glob("/run/loft-testbed/*.json"):
        try:
            with open(p) as f:
                st = json.load(f)
        except (OSError, ValueError):
            continue
        if st.get("owner_pid") == pid:
            return st
    return None


def state_of_run(pid, timeout=60):
    """The state JSON of the testbed owned by loftctl `pid`, once its agents run."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = state_file_of(pid)
        if st is not None:
            pids = subprocess.run(["ip", "netns", "pids", st["nodes"][-1]["netns"]], capture_output=True,
                                  text=True).stdout.split()
            if pids:
                return st, [int(x) for x in pids]
        time.sleep(0.2)
    sys.exit(f"no testbed with running agents appeared for loftctl pid {pid}")


def start_run(spec, out):
    return subprocess.Popen([loft_it.exe("loftctl"), "cluster", "run", spec, "--testbed", "--iterations",
                             "100000", "--out", out, "--timeout-s", "300"], stdout=subprocess.DEVNULL,
                            stderr=open(out + ".stderr", "w"), start_new_session=True)


def test_killed_run():
    require_support()
    tmp = tmpdir("loft-tb-kill-")
    spec = write(tmp, "two.yaml", TWO_NODES)
    # kill -9: the run cannot clean up; `testbed down SPEC` must.
    run = start_run(spec, os.path.join(tmp, "out"))
    st, agent_pids = state_of_run(run.pid)
    tag = st["tag"]
    r = loftctl("testbed", "down", spec)
    assert "kept" in r.stderr and leftovers(tag), f"down removed a live run's testbed:\n{r.stderr}"
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert leftovers(tag), "the killed run left nothing to clean (was the testbed built?)"
    r = loftctl("testbed", "down", spec)
    print(r.stderr)
    assert leftovers(tag) == [], leftovers(tag)
    for p in agent_pids:
        assert not os.path.exists(f"/proc/{p}") or "zombie" in open(f"/proc/{p}/status").read().lower(), \
            f"agent pid {p} survived testbed down"
    # Ctrl-C: the run removes its testbed itself.
    run = start_run(spec, os.path.join(tmp, "out2"))
    st, _ = state_of_run(run.pid)
    run.send_signal(signal.SIGINT)
    rc = run.wait(timeout=60)
    assert rc == 130, f"an interrupted cluster run exits with 130, not {rc}"
    assert leftovers(st["tag"]) == [], leftovers(st["tag"])
    # Ctrl-C while the testbed is being built (its state file is written
    # first): the run still removes everything (a default SIGINT there left
    # the namespaces and cgroups behind).
    run = start_run(spec, os.path.join(tmp, "out3"))
    deadline, early = time.time() + 60, None
    while early is None and time.time() < deadline:
        early = state_file_of(run.pid)
        time.sleep(0.005)
    assert early is not None, "no testbed state file appeared"
    run.send_signal(signal.SIGINT)
    rc = run.wait(timeout=60)
    assert rc == 130, f"a cluster run interrupted during its set-up exits with 130, not {rc}"
    assert leftovers(early["tag"]) == [], leftovers(early["tag"])
    print(f"ok: killed run {tag} cleaned by testbed down, interrupted runs {st['tag']} and "
          f"{early['tag']} (during set-up) cleaned themselves")


def root_cgroup_controllers():
    """What the testbed could change in the root cgroup: cgroup v2's
    subtree_control (the cpu controller it enables), or "" on cgroup v1."""
    try:
        with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
            return f.read().strip()
    except OSError:
        return ""


def no_other_testbed():
    """Skips when another testbed (another engineer's run) is on this machine:
    these tests kill, clean and count testbeds."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    others = [l.split()[0] for l in netns.splitlines() if l.startswith("lft")]
    if others or glob.glob("/run/loft-testbed/lft*.json"):
        skip(f"another testbed is on this machine ({others or glob.glob('/run/loft-testbed/lft*.json')}); "
             "not touching it")


def uid_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return [int(x) for x in line.split()[1:]]
    return None


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in f.read().lower()
    except OSError:
        return False


def stop_run(run):
    """Ends a run a failed check left behind (SIGTERM: it cleans up)."""
    if run.poll() is None:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.kill()


def test_clean():
    require_support()
    no_other_testbed()
    tmp = tmpdir("loft-tb-clean-")
    spec = write(tmp, "two.yaml", TWO_NODES)
    before = root_cgroup_controllers()
    run = start_run(spec, os.path.join(tmp, "out"))
    st, agent_pids = state_of_run(run.pid)
    tag = st["tag"]
    run.send_signal(signal.SIGKILL)
    run.wait()
    left = leftovers(tag)
    assert any(x.startswith("netns") for x in left) and any(x.startswith("link") for x in left) and \
        any(x.startswith("cgroup") for x in left), f"the killed run left {left}: was the testbed built?"
    assert all(alive(p) for p in agent_pids), "the agents died with loftctl: nothing to clean"
    r = loftctl("testbed", "clean")
    print(r.stdout, r.stderr)
    assert leftovers(tag) == [], leftovers(tag)
    assert f"netns {tag}-n0" in r.stdout and f"cgroup " in r.stdout, f"clean did not say what it removed:\n{r.stdout}"
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert "lft" not in netns and " lft" not in links, (netns, links)
    for root in CGROUP_ROOTS:
        assert not glob.glob(os.path.join(root, "lft*")), glob.glob(os.path.join(root, "lft*"))
    assert not [p for p in agent_pids if alive(p)], "agents survived testbed clean"
    assert root_cgroup_controllers() == before, (before, root_cgroup_controllers())
    r = loftctl("testbed", "clean")
    assert "nothing to clean" in r.stdout, f"a second clean is not a no-op:\n{r.stdout}{r.stderr}"
    # kill -9 again: the next run finds the stale testbed and removes it.
    run = start_run(spec, os.path.join(tmp, "out2"))
    st, _ = state_of_run(run.pid)
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert leftovers(st["tag"]), "the killed run left nothing"
    r = subprocess.run([loft_it.exe("loftctl"), "cluster", "run", spec, "--testbed", "--iterations", "5",
                        "--out", os.path.join(tmp, "out3"), "--timeout-s", "60"], capture_output=True, text=True,
                       timeout=120)
    print(r.stderr[-2000:])
    assert r.returncode == 0, f"the run after a killed one failed ({r.returncode})"
    assert f"stale testbed {st['tag']}" in r.stderr, "the run did not say it removed the stale testbed"
    assert leftovers(st["tag"]) == [], leftovers(st["tag"])
    assert root_cgroup_controllers() == before, (before, root_cgroup_controllers())
    print(f"ok: {tag} removed by testbed clean, {st['tag']} by the next run")


def test_signals():
    require_support()
    no_other_testbed()
    tmp = tmpdir("loft-tb-sig-")
    spec = write(tmp, "two.yaml", TWO_NODES)
    for sig in (signal.SIGHUP, signal.SIGQUIT):
        run = start_run(spec, os.path.join(tmp, f"out-{sig.name}"))
        st, agent_pids = state_of_run(run.pid)
        run.send_signal(sig)
        rc = run.wait(timeout=60)
        assert rc == 130, f"a cluster run ended by {sig.name} exits with 130, not {rc}"
        assert leftovers(st["tag"]) == [], (sig.name, leftovers(st["tag"]))
        assert not [p for p in agent_pids if alive(p)], f"agents survived {sig.name}"
        with open(os.path.join(tmp, f"out-{sig.name}", "summary.json")) as f:
            assert json.load(f)["stopped"]["reason"] == "interrupted"
    print("ok: SIGHUP and SIGQUIT cleaned up")


def test_tool_path():
    require_support()
    tmp = tmpdir("loft-tb-path-")
    spec = write(tmp, "two.yaml", TWO_NODES)
    fake = os.path.join(tmp, "bin")
    os.mkdir(fake)
    marker = os.path.join(tmp, "ran")
    for tool in ("ip", "tc"):
        p = write(fake, tool, f"#!/bin/sh\necho {tool} \"$@\" >> {marker}\nexit 1\n")
        os.chmod(p, 0o755)
    env = dict(os.environ, PATH=fake + ":" + os.environ.get("PATH", "/usr/bin:/bin"))

    def run(*args):
        r = subprocess.run([loft_it.exe("loftctl"), *args], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, f"loftctl {' '.join(args)} with a fake ip/tc first in PATH failed:\n{r.stderr}"
        return r

    run("testbed", "check")
    st_path = run("testbed", "up", spec).stdout.strip()
    with open(st_path) as f:
        tag = json.load(f)["tag"]
    run("testbed", "down", spec)
    assert not os.path.exists(marker), f"loftctl ran the PATH's ip/tc: {open(marker).read()}"
    assert leftovers(tag) == [], leftovers(tag)
    print("ok: ip and tc ran from their system directories, never from PATH")


def test_daemon_user():
    require_support()
    no_other_testbed()
    tmp = tmpdir("loft-tb-user-")
    spec = write(tmp, "two.yaml", TWO_NODES)
    out = os.path.join(tmp, "out")
    nobody = int(subprocess.run(["id", "-u", "nobody"], capture_output=True, text=True, check=True).stdout)
    run = subprocess.Popen([loft_it.exe("loftctl"), "cluster", "run", spec, "--testbed", "--iterations", "300",
                            "--out", out, "--timeout-s", "120"], stdout=subprocess.DEVNULL,
                           stderr=open(out + ".stderr", "w"), start_new_session=True)
    try:
        st, agent_pids, sched_pids = check_daemon_user(run, nobody)
        rc = run.wait(timeout=150)
    finally:
        stop_run(run)
    err = open(out + ".stderr").read()
    assert rc == 0, f"the run as nobody failed ({rc}):\n{err[-3000:]}"
    with open(os.path.join(out, "summary.json")) as f:
        assert json.load(f)["ledger"]["lost"] == 0
    assert leftovers(st["tag"]) == [], leftovers(st["tag"])
    print(f"ok: scheduler {sched_pids} and agents {agent_pids} ran as uid {nobody}")


def check_daemon_user(run, nobody):
    """The running daemons' uids, cgroup, quota and tbf; -> (state, agent pids, scheduler pids)."""
    st, _ = state_of_run(run.pid)
    # A namespace may still hold a short-lived setup process, or no agent
    # yet, when the last one first shows a pid: wait for one per namespace.
    deadline = time.time() + 10
    while True:
        agent_pids = []
        for n in st["nodes"]:
            agent_pids += [int(x) for x in subprocess.run(["ip", "netns", "pids", n["netns"]],
                                                          capture_output=True, text=True).stdout.split()]
        if len(agent_pids) == len(st["nodes"]) or time.time() > deadline:
            break
        time.sleep(0.05)
    assert len(agent_pids) == len(st["nodes"]), f"not one process per node namespace: {agent_pids}"
    with open(os.path.join(st["cgroup"], "sched", "cgroup.procs")) as f:
        sched_pids = [int(x) for x in f.read().split()]
    assert sched_pids, "no scheduler in the testbed's sched cgroup"
    # `testbed exec` joins the namespace as root, then drops root and execs the daemon.
    deadline = time.time() + 10
    while time.time() < deadline and not all(comm(p) in ("loft-agent", "loft-scheduler")
                                             for p in agent_pids + sched_pids):
        time.sleep(0.05)
    for p in agent_pids + sched_pids:
        assert uid_of(p) == [nobody] * 4, f"pid {p} runs as uid {uid_of(p)}, not nobody ({nobody})"
    # Still under the root parent's quota and tbf.
    a = st["nodes"][0]
    a_pids = subprocess.run(["ip", "netns", "pids", a["netns"]], capture_output=True, text=True).stdout.split()
    with open(os.path.join(a["cgroup"], "cgroup.procs")) as f:
        assert set(a_pids) <= set(f.read().split()), "node a's agent is not in its cgroup"
    qfile = "cpu.max" if st["cgroup_v2"] else "cpu.cfs_quota_us"
    with open(os.path.join(a["cgroup"], qfile)) as f:
        assert f.read().split()[0] == "2500", f"node a (cpu_cores 0.25) has no quota in {qfile}"
    qd = subprocess.run(["tc", "qdisc", "show", "dev", f"{st['tag']}h0"], capture_output=True, text=True).stdout
    assert "tbf" in qd, qd
    return st, agent_pids, sched_pids


def test_smoke():
    require_support()
    if not os.path.isdir(loft_it.DATASET):
        skip(f"no Fashion-MNIST at {loft_it.DATASET}")
    tmp = tmpdir("loft-tb-smoke-")
    out = os.path.join(tmp, "out")
    spec = os.path.join(REPO, "examples/clusters/edge-bandwidth.yaml")
    r = subprocess.run([loft_it.exe("loftctl"), "cluster", "run", spec, "--testbed", "--iterations", "8",
                        "--eval-every", "0", "--out", out, "--timeout-s", "400"], capture_output=True,
                       text=True, timeout=450)
    print(r.stderr[-3000:])
    assert r.returncode == 0, f"cluster run --testbed failed ({r.returncode})"
    tag = [w for w in r.stderr.split() if w.startswith("lft")][0]
    assert leftovers(tag) == [], leftovers(tag)
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    assert s["ledger"]["lost"] == 0 and s["ledger"]["duplicates"] == 0, s["ledger"]
    assert s["policies"]["loft"]["remote_bytes"] >= 0
    with open(os.path.join(out, "iterations.csv")) as f:
        rows = list(csv.DictReader(f))  # one row per worker per iteration (sched::RunRecorder)
    iters = {r["iteration"] for r in rows}
    assert len(iters) == 8, sorted(iters)
    assert all(1 <= sum(r["iteration"] == i for r in rows) <= 8 for i in iters), rows
    assert len({r["worker"] for r in rows}) >= 2, rows
    # testbed.json: each agent's quota accounting (cgroup cpu.stat) and its partitions.
    with open(os.path.join(out, "testbed.json")) as f:
        tb = json.load(f)
    assert tb["tag"] == tag, tb
    assert set(tb["nodes"]) >= {r["worker"] for r in rows}, tb
    assert len(tb["nodes"]) == 8, tb
    for name, n in tb["nodes"].items():
        assert "error" not in n, (name, n)
        assert n["nr_throttled"] >= 0 and n["throttled_ms"] >= 0, (name, n)
        assert n["cpu_cores"] is None, (name, n)  # edge-bandwidth.yaml sets no quota
        assert n["partitions_done"] >= 1, (name, n)
        assert n["usage_ms"] is not None and n["usage_ms"] >= 0, (name, n)  # the agents still ran
        assert 0 <= n["job"]["partitions_done"] <= n["partitions_done"], (name, n)
        assert 0 <= n["job"]["usage_ms"] <= n["usage_ms"], (name, n)
    assert tb["job_from_iteration"] >= 0, tb
    assert "error" not in tb["scheduler"], tb
    for log in glob.glob(os.path.join(out, "logs", "agent-*.log")):
        text = open(log).read()
        assert "link EMULATION of latency only" in text, f"{log}: token buckets were not turned off"
        assert "serving peers on tcp://10.213." in text, f"{log}: agent not on the testbed bridge"
    print("ok", json.dumps(s["policies"]))


if __name__ == "__main__":
    tests = {"link_rate": test_link_rate, "priority": test_priority, "cpu_quota": test_cpu_quota, "killed_run": test_killed_run,
             "smoke": test_smoke, "clean": test_clean, "signals": test_signals, "daemon_user": test_daemon_user,
             "tool_path": test_tool_path}
    if len(sys.argv) != 2 or sys.argv[1] not in tests:
        sys.exit(f"usage: testbed_test.py {'|'.join(tests)}")
    tests[sys.argv[1]]()
    print("ok")
