#!/bin/sh
# tbf-probe.sh RATE_MBIT BURST_BYTES: what a TCP stream gets through the
# testbed's link (a veth between two namespaces, tbf RATE BURST latency
# 100ms on the sender's side): transfers after the link idled (the burst)
# and sustained payload rates, then the qdisc's counters (link bytes).
# Root; iproute2 and python3. docs/testbed.md "What the links deliver".
set -eu
R=$1; B=$2
D=$(mktemp -d)
cleanup() { [ -n "${S:-}" ] && kill "$S" 2>/dev/null; ip netns del lfprobeA 2>/dev/null; ip netns del lfprobeB 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT INT TERM
cat > "$D/srv.py" <<'PY'
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.250.0.2", 5555)); s.listen(16)
def h(c):
    while True:
        hdr = c.recv(8, socket.MSG_WAITALL)
        if len(hdr) < 8: return
        n = int.from_bytes(hdr, "big"); got = 0
        while got < n:
            d = c.recv(min(65536, n - got))
            if not d: return
            got += len(d)
        c.sendall(b"k")
while True:
    c, _ = s.accept(); threading.Thread(target=h, args=(c,), daemon=True).start()
PY
cat > "$D/cli.py" <<'PY'
import socket, sys, time, threading
rate, burst = float(sys.argv[1]), int(sys.argv[2])
sent = [0]
def xfer(c, n):
    t0 = time.perf_counter(); c.sendall(n.to_bytes(8, "big") + b"\0" * n); c.recv(1)
    sent[0] += n + 8
    return time.perf_counter() - t0
c = socket.create_connection(("10.250.0.2", 5555)); xfer(c, 1000)
Bps = rate * 1e6 / 8
for n in (16384, 49152, 200000, 1000000):
    ts = []
    for _ in range(3):
        time.sleep(0.3); ts.append(xfer(c, n))
    t = sorted(ts)[1]
    print(f"{n} B after 0.3 s idle: {t*1000:.1f} ms (nominal {n/Bps*1000:.1f}), payload {n*8/t/1e6:.2f} Mbit/s", flush=True)
for k in (1, 4, 8):
    cs = [socket.create_connection(("10.250.0.2", 5555)) for _ in range(k)]
    for x in cs: xfer(x, 1000)
    time.sleep(0.3)
    res = [0] * k
    th = [threading.Thread(target=lambda i=i: res.__setitem__(i, xfer(cs[i], 200000))) for i in range(k)]
    t0 = time.perf_counter(); [x.start() for x in th]; [x.join() for x in th]; T = time.perf_counter() - t0
    print(f"{k} flows x 200000 B: {T*1000:.1f} ms (nominal {k*200000/Bps*1000:.1f}), payload {k*200000*8/T/1e6:.2f} Mbit/s, "
          f"per flow {sorted(round(x*1000) for x in res)} ms", flush=True)
print(f"TCP payload sent: {sent[0]} bytes (the qdisc's Sent below counts link bytes)")
PY
ip netns add lfprobeA; ip netns add lfprobeB
ip link add lfpa netns lfprobeA type veth peer name lfpb netns lfprobeB
ip -n lfprobeA addr add 10.250.0.1/24 dev lfpa; ip -n lfprobeB addr add 10.250.0.2/24 dev lfpb
for n in lfprobeA lfprobeB; do ip -n $n link set lo up; done
ip -n lfprobeA link set lfpa up; ip -n lfprobeB link set lfpb up
tc -n lfprobeA qdisc add dev lfpa root tbf rate "${R}mbit" burst "$B" latency 100ms
ip netns exec lfprobeB python3 "$D/srv.py" & S=$!
sleep 0.5
echo "tbf rate ${R} Mbit/s burst ${B} B latency 100ms"
ip netns exec lfprobeA python3 "$D/cli.py" "$R" "$B"
tc -n lfprobeA -s qdisc show dev lfpa | sed -n 2p
