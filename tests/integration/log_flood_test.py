"""Log flooding, black-box (CURVE on): every log line a peer can cause is
rate-limited per kind and peer (core/log_limiter.h PeerLogLimits: 10 per
10 s), peer text in a line is cut to 200 bytes and escaped, and what is held
back is counted (`*_log_suppressed_total{kind}`, status counters).

1. The scheduler (no job running), flooded for 5 s by the holder of node
   edge-0's key with, round robin: Error envelopes carrying 4,096 bytes of
   text full of line breaks, PeerReports with 256-byte reasons, poisoning
   reports for made-up partitions with 4,096-byte reasons, and Errors whose
   text is not UTF-8 (protobuf refuses to parse them, and logs why).
2. An agent with compute_mode external, flooded for 5 s on its consumer
   endpoint with undecodable frames, refused hellos with a 64 KB client
   name, reports from a connection that is not the consumer, and consumers
   that connect and leave.

Each log grows by a few dozen lines of at most ~1 KB, none of them peer text
starting a line of its own, while the flood (thousands of messages of each
kind) is counted. Before the limits every Error was logged at info with its
4 KB of text (a line break in it started a forged line), every PeerReport
and every consumer frame got a line."""
import json
import os
import re
import subprocess
import time
import urllib.request

import loft_it

SECONDS = 5
LINE_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} \w+ \[loft-")


def metrics(port, name):
    """{kind: value} of a counter family with the label kind."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(name + r'\{kind="([^"]+)"\} (\S+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def metric(port, name, labels):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def log_growth(path, before):
    with open(path, "rb") as f:
        f.seek(before)
        added = f.read()
    lines = added.decode(errors="replace").splitlines()
    return len(added), lines


def check_log(name, added_bytes, lines, max_lines, failures):
    longest = max((len(l) for l in lines), default=0)
    forged = [l for l in lines if not LINE_RE.match(l)]
    loft_it.log(f"{name}: log grew {added_bytes} bytes, {len(lines)} lines (longest {longest}) under the flood")
    if len(lines) > max_lines:
        failures.append(f"{name}: {len(lines)} log lines under the flood (at most {max_lines})")
    if added_bytes > max_lines * 1200:
        failures.append(f"{name}: the log grew {added_bytes} bytes under the flood")
    if longest > 1200:
        failures.append(f"{name}: a log line of {longest} bytes")
    if forged:
        failures.append(f"{name}: {len(forged)} lines do not start with a timestamp, e.g. {forged[0][:120]!r}")


c = loft_it.small_cluster(10)
failures = []
try:
    names = loft_it.edge_names(4)
    c.prepare(names)
    mport = loft_it.free_port()
    with open(c.sched_cfg, "a") as f:
        f.write(f"metrics_port: {mport}\n")
    c.start_scheduler()
    c.wait_for(lambda s: s is not None, 30, "scheduler up")
    sched_log = os.path.join(c.tmp, "scheduler.log")
    before = os.path.getsize(sched_log)
    r = subprocess.run([loft_it.exe("it_client"), "log-flood", c.endpoint, c.keys, "edge-0", "0", "4",
                        str(SECONDS)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    sent = json.loads(r.stdout.strip().splitlines()[-1])
    loft_it.log(f"scheduler flood: {sent}")
    for kind in ("error", "peer_report", "poison_report", "not_utf8"):
        assert sent.get(kind, 0) >= 500, f"the flood sent too few {kind} messages to show anything: {sent}"
    # Everything sent was handled: the poisoning reports are counted.
    st = c.wait_for(lambda s: s["poisoning"]["ignored_reports"] >= sent["poison_report"], 30,
                    "the flood handled")
    time.sleep(0.5)
    added, lines = log_growth(sched_log, before)
    # 3 kinds x 10 lines per 10 s window (the flood may span 2 windows;
    # protobuf's complaints are at debug level),
    # the eviction its PeerReports cause, and a few of the scheduler's own.
    check_log("scheduler", added, lines, 80, failures)
    suppressed = metrics(mport, "loft_scheduler_log_suppressed_total")
    loft_it.log(f"scheduler: loft_scheduler_log_suppressed_total {suppressed}; status poisoning "
                f"ignored_reports {st['poisoning']['ignored_reports']}, reports_ignored {st['reports_ignored']}")
    for kind, sent_kind in (("peer_error", "error"), ("peer_report", "peer_report")):
        if suppressed.get(kind, 0) < sent[sent_kind] - 40:
            failures.append(f"scheduler: {kind} suppressed {suppressed.get(kind, 0)} of {sent[sent_kind]} sent")
    malformed = metric(mport, "loft_scheduler_dropped_total", 'reason="malformed"')
    if malformed < sent["not_utf8"]:
        failures.append(f"scheduler: {malformed} malformed messages counted of {sent['not_utf8']} not UTF-8")
    if st["reports_ignored"] < sent["poison_report"]:
        failures.append(f"scheduler: reports_ignored {st['reports_ignored']} < {sent['poison_report']}")

    # 2. An agent's consumer endpoint.
    amport = loft_it.free_port()
    sock = os.path.join(c.tmp, "consumer.sock")
    cfg = c.agent_config("edge-1")
    with open(cfg) as f:
        text = f.read().replace("compute_mode: synthetic\n", "compute_mode: external\n")
    with open(cfg, "w") as f:
        f.write(text + f"consumer_endpoint: ipc://{sock}\nmetrics_port: {amport}\n")
    c._spawn("edge-1", [loft_it.exe("loft-agent"), "--config", cfg])
    agent_log = os.path.join(c.tmp, "edge-1.log")
    deadline = time.time() + 30
    while time.time() < deadline and not os.path.exists(sock):
        time.sleep(0.1)
    assert os.path.exists(sock), "the agent did not bind its consumer endpoint"
    time.sleep(1)
    before = os.path.getsize(agent_log)
    r = subprocess.run([loft_it.exe("it_client"), "consumer-flood", f"ipc://{sock}", str(SECONDS)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    sent = json.loads(r.stdout.strip().splitlines()[-1])
    loft_it.log(f"consumer flood: {sent}")
    for kind in ("undecodable", "refused_hello", "not_consumer"):
        assert sent.get(kind, 0) >= 500, f"the flood sent too few {kind} frames to show anything: {sent}"
    # The agent drains its consumer socket between partitions (Idle).
    want = sent["undecodable"] + sent["refused_hello"] + sent["not_consumer"] - 60
    deadline = time.time() + 30
    suppressed = {}
    while time.time() < deadline:
        suppressed = metrics(amport, "loft_agent_log_suppressed_total")
        if sum(suppressed.values()) >= want:
            break
        time.sleep(0.3)
    loft_it.log(f"agent: loft_agent_log_suppressed_total {suppressed}")
    added, lines = log_growth(agent_log, before)
    # 6 kinds (undecodable, refused, not the consumer, connected,
    # disconnected, another consumer) x 10 per window, 2 windows.
    check_log("agent", added, lines, 130, failures)
    for kind, sent_kind in (("consumer_undecodable", "undecodable"), ("consumer_refused", "refused_hello")):
        if suppressed.get(kind, 0) < sent[sent_kind] - 40:
            failures.append(f"agent: {kind} suppressed {suppressed.get(kind, 0)} of {sent[sent_kind]} sent")
    if not c.alive("scheduler") or not c.alive("edge-1"):
        failures.append("a daemon died under the flood")
    if failures:
        c.dump_logs(10)
        for f in failures:
            print("FAIL:", f)
        raise SystemExit(1)
    print("ok")
finally:
    c.stop()
