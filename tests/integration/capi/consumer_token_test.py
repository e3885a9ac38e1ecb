"""Who may consume an agent's batches (compute_mode external), with a real
loft-scheduler and loft-agents (insecure loopback; edge-0 external,
edge-1 synthetic):
 1. a tcp:// consumer endpoint without consumer_token is refused at
    start-up (any local user could connect to the port): the agent exits
    with an error naming consumer_token;
 2. with consumer_token on tcp://, the Python consumer (python/loft, the C
    API) with no LOFT_CONSUMER_TOKEN or a wrong one is refused
    ("wrong consumer token") and gets no batch; with the right one it takes
    and acknowledges batches;
 3. an ipc:// endpoint without a token is an owner-only socket file (0600):
    another user's connect() is refused by the kernel (EACCES).
env: LOFT_BIN_DIR, LOFT_IT_DIR, LOFT_PY_DIR, LOFT_LIBRARY."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.environ["LOFT_IT_DIR"])
import loft_it  # noqa: E402

spec = loft_it.SMALL_SPEC.format(samples=2000, replication=2, per_sample_ms=0.05).replace("count: 4", "count: 2")
c = loft_it.Cluster(spec, secure=False, iterations=200)


def external_config(endpoint, token=None):
    cfg = c.agent_config("edge-0")
    with open(cfg) as f:
        text = f.read().replace("compute_mode: synthetic\n", "")
    with open(cfg, "w") as f:
        f.write(text + f"compute_mode: external\nconsumer_endpoint: {endpoint}\nconsumer_timeout_ms: 3000\n")
        if token is not None:
            f.write(f"consumer_token: {token}\n")
    return cfg


def consume(endpoint, token):
    """The Python consumer takes one batch (30 s): its stdout, or the refusal."""
    py = ("import sys; sys.path.insert(0, sys.argv[2]); import loft\n"
          "with loft.Consumer(sys.argv[1]) as c:\n"
          "    try:\n"
          "        with c.next(30000) as b:\n"
          "            b.report(1.0)\n"
          "            print('batch', b.partition_id, len(b))\n"
          "    except loft.LoftError as e:\n"
          "        print('refused:', e)\n")
    env = dict(os.environ)
    env.pop("LOFT_CONSUMER_TOKEN", None)
    if token is not None:
        env["LOFT_CONSUMER_TOKEN"] = token
    r = subprocess.run([sys.executable, "-c", py, endpoint, os.environ["LOFT_PY_DIR"]], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


try:
    c.prepare(["edge-0", "edge-1"])
    c.start_scheduler()
    port = loft_it.free_port()
    tcp = f"tcp://127.0.0.1:{port}"

    # 1. tcp:// without a token: refused at start-up.
    p = subprocess.Popen([loft_it.exe("loft-agent"), "--config", external_config(tcp)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        raise AssertionError("the agent serves a tcp:// consumer endpoint without a token:\n" + out[-3000:])
    assert p.returncode != 0, out[-3000:]
    assert f"consumer_endpoint {tcp} needs consumer_token" in out, out[-3000:]
    loft_it.log("tcp:// without consumer_token refused at start-up")

    # 2. tcp:// with a token: a consumer without it, or with another, is refused.
    c._spawn("edge-0", [loft_it.exe("loft-agent"), "--config", external_config(tcp, "s3cret-7f2a")])
    c.start_agent("edge-1")
    for token in (None, "s3cret-7f2b"):
        got = consume(tcp, token)
        assert got.startswith("refused:") and "wrong consumer token" in got, (token, got)
        loft_it.log(f"LOFT_CONSUMER_TOKEN={token!r}: {got}")
    got = consume(tcp, "s3cret-7f2a")
    assert got.startswith("batch "), got
    loft_it.log(f"the right token: {got}")
    with open(os.path.join(c.tmp, "edge-0.log")) as f:
        log = f.read()
    assert log.count("wrong consumer token") >= 2, log[-3000:]

    # 3. ipc:// without a token: the socket file is owner-only; another
    # user (nobody) cannot connect to it.
    c.procs["edge-0"].terminate()
    c.procs["edge-0"].wait(timeout=10)
    sockdir = os.path.join(c.tmp, "ipc")
    os.makedirs(sockdir)
    os.chmod(c.tmp, 0o755)
    os.chmod(sockdir, 0o755)  # traversable by everyone: only the socket's own mode protects it
    sock = os.path.join(sockdir, "consumer.sock")
    c._spawn("edge-0", [loft_it.exe("loft-agent"), "--config", external_config(f"ipc://{sock}")])
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    assert os.stat(sock).st_mode & 0o777 == 0o600, oct(os.stat(sock).st_mode)
    probe = ("import os, socket, sys\n"
             "os.setgid(65534); os.setuid(65534)\n"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
             "try:\n"
             "    s.connect(sys.argv[1]); print('connected')\n"
             "except PermissionError as e:\n"
             "    print('refused', e.errno)\n")
    if os.getuid() == 0:
        r = subprocess.run([sys.executable, "-c", probe, sock], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip().startswith("refused"), r.stdout + r.stderr
        loft_it.log(f"user nobody on the 0600 ipc socket: {r.stdout.strip()}")
    else:
        loft_it.log("not root: cannot try another user's connect (the 0600 mode is checked)")
    got = consume(f"ipc://{sock}", None)  # the owner needs no token
    assert got.startswith("batch "), got
    print("ok")
except BaseException:
    c.dump_logs()
    raise
finally:
    c.stop()
