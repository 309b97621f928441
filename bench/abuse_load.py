#!/usr/bin/env python3
"""imgd under abuse: every pattern of issue 15 §1 at once while well-behaved clients `get`
(Python 3 stdlib only). Run by abuse-load.sh, which provides nginx, the corpus and the work
folder.

  abuse_load.py --imgd BIN --work DIR --base-url URL --small-list small.txt --big-url URL
                [--duration 30] [--clients 16] [--results RESULTS.md] [--command TEXT]

One daemon, its settings at their defaults (`--disk-limit 2GiB` aside). First the small images
of the list and the big image (`--big-url`, ~40 MB) are fetched into the cache, and the 16
well-behaved clients connect (one connection each, kept). Then, at once, for --duration s:

- add flood: one connection sends 40 `add` requests of 30,000 URLs (pipelined, then reads the
  replies), then `add` requests of 10,000 URLs (the most allowed) until 20 have been sent; the
  URLs point at a port that accepts connections and never answers, so what is taken stays
  queued. Counted: replies by code (invalid_argument, queue_full, accepted URLs).
  With --long-urls instead: 840 `add`s of 127 URLs of ~8,000 characters (each line just under
  the 1 MiB limit), sent 20 at a time; the first half to the port that never answers (held:
  `max-queued-bytes`), the second to port 1 (refused at once, so remembered: the failure
  memory's byte cap).
- data hogs: 10 connections each send 20 `get` with `data: true` for the big image, pipelined,
  and never read.
- junk list: a 10,000-line list of 8 KiB lines of junk dropped in the spool.
- idle subscribers: 256 connections that `subscribe` and then send nothing (those refused with
  `busy` are counted).
- well-behaved: 16 clients loop `get` of small cached images on their connections (a reply
  within 5 s counts as answered; a connection lost is re-made and counts as not answered).

VmHWM and VmRSS of /proc/PID/status are sampled every 50 ms. The section written: peak RSS
(VmHWM, from the daemon's start) against the target of 256 MiB, well-behaved requests answered
and not, latency p50/p99/max, and what each abuser got back.
"""
import argparse
import json
import os
import random
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True   # no bench/__pycache__ beside the sources
import imgd_daemon  # noqa: E402
import results_md  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
MIB = 1024  # KiB per MiB
TARGET_KIB = 256 * MIB


def log(message: str) -> None:
    print(f"[abuse {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def connect(path: str, timeout: float = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(path)
    return sock


def read_line(sock: socket.socket, buffer: bytearray) -> bytes:
    while b"\n" not in buffer:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed by the daemon")
        buffer += chunk
    end = buffer.index(b"\n")
    line = bytes(buffer[:end])
    del buffer[:end + 1]
    return line


class Blackhole:
    """A port that accepts connections into its backlog and never answers: transfers to it
    stay in flight until imgd's own timeouts, so what is queued behind them stays queued."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4096)
        self.port = self.sock.getsockname()[1]


class Sampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.rss_peak = 0
        self.hwm = 0

    def run(self):
        while not self.stop.is_set():
            try:
                status = imgd_daemon.proc_status(self.pid)
            except OSError:
                return
            self.rss_peak = max(self.rss_peak, status.get("VmRSS", 0))
            self.hwm = max(self.hwm, status.get("VmHWM", 0))
            time.sleep(0.05)


LONG_PADDING = 8_000


def add_flood(path: str, hole: int, stop: threading.Event, out: dict, long_urls: bool = False) -> None:
    """40 adds of 30,000 URLs, then adds of 10,000 until 20 more were sent; with `long_urls`,
    840 adds of 127 URLs of ~8,000 characters (half held, half refused and remembered)."""
    counts = {}
    accepted = 0
    serial = 0

    def batch(n: int, port: int = hole, padding: int = 0) -> bytes:
        nonlocal serial
        # Short URLs (a hex serial as the query), so 30,000 fit in one line under 1 MiB; or
        # padded to ~8,000 characters, 127 to a line.
        pad = "p" * padding
        urls = [f"http://127.0.0.1:{port}/?{serial + i:x}{pad}" for i in range(n)]
        serial += n
        line = json.dumps({"cmd": "add", "urls": urls}, separators=(",", ":")).encode() + b"\n"
        assert len(line) <= 1 << 20, f"an add line of {len(line)} bytes is over the 1 MiB line limit"
        return line

    if long_urls:
        groups = [[(127, hole, LONG_PADDING)] * 20] * 21 + [[(127, 1, LONG_PADDING)] * 20] * 21
    else:
        groups = [[(30_000, hole, 0)] * 40, [(10_000, hole, 0)] * 20]
    try:
        sock = connect(path, timeout=60)
        buffer = bytearray()
        for group in groups:
            sock.sendall(b"".join(batch(*spec) for spec in group))
            for _ in group:
                reply = json.loads(read_line(sock, buffer))
                if reply.get("ok"):
                    counts["ok"] = counts.get("ok", 0) + 1
                    accepted += reply["result"]["accepted"]
                else:
                    code = reply["error"]["code"]
                    counts[code] = counts.get(code, 0) + 1
                    out.setdefault("messages", {}).setdefault(code, reply["error"]["message"])
        sock.close()
    except (OSError, ConnectionError, ValueError) as error:
        out["error"] = str(error)
    out["replies"] = counts
    out["accepted_urls"] = accepted


def data_hog(path: str, url: str, stop: threading.Event, out: dict) -> None:
    """20 pipelined `get` with data for the big image; never reads; holds on until told."""
    try:
        sock = connect(path)
        sock.setblocking(False)
        line = json.dumps({"cmd": "get", "url": url, "data": True}).encode() + b"\n"
        try:
            sock.send(line * 20)
        except BlockingIOError:
            pass
        stop.wait()
        sock.close()
        out["sent"] = out.get("sent", 0) + 1
    except OSError as error:
        out["error"] = str(error)


def subscribers(path: str, count: int, stop: threading.Event, out: dict) -> None:
    socks = []
    busy = 0
    other = 0
    kinds = {}
    for _ in range(count):
        try:
            sock = connect(path)
            sock.sendall(b'{"cmd":"subscribe"}\n')
            buffer = bytearray()
            reply = json.loads(read_line(sock, buffer))
            if reply.get("ok"):
                socks.append(sock)
            else:
                busy += reply["error"]["code"] == "busy"
                sock.close()
        except (OSError, ConnectionError, ValueError) as error:
            other += 1
            kinds[type(error).__name__] = kinds.get(type(error).__name__, 0) + 1
    out["subscribed"] = len(socks)
    out["busy"] = busy
    out["failed"] = other
    out["failed_kinds"] = kinds
    stop.wait()
    for sock in socks:
        sock.close()


def well_behaved(path: str, urls: list, stop: threading.Event, out: dict, seed: int) -> None:
    rng = random.Random(seed)
    answered = unanswered = 0
    latencies = []
    errors = {}
    sock = None
    buffer = bytearray()
    while not stop.is_set():
        try:
            if sock is None:
                sock = connect(path, timeout=5)
                buffer = bytearray()
            url = rng.choice(urls)
            started = time.monotonic()
            sock.sendall(json.dumps({"cmd": "get", "url": url}).encode() + b"\n")
            reply = json.loads(read_line(sock, buffer))
            if reply.get("ok"):
                answered += 1
                latencies.append(time.monotonic() - started)
            else:
                unanswered += 1
                code = reply["error"]["code"]
                errors[code] = errors.get(code, 0) + 1
                if code == "busy":
                    sock.close()
                    sock = None
                    time.sleep(0.05)
        except (OSError, ConnectionError, ValueError) as error:
            unanswered += 1
            kind = type(error).__name__
            errors[kind] = errors.get(kind, 0) + 1
            if sock is not None:
                sock.close()
            sock = None
            time.sleep(0.05)
    if sock is not None:
        sock.close()
    out["answered"] = answered
    out["unanswered"] = unanswered
    out["latencies"] = latencies
    out["errors"] = errors


def junk_list(spool: str, lines: int, out: dict) -> None:
    rng = random.Random(15)
    tmp = os.path.join(spool, ".junk.txt.tmp")
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789/:?&=%"
    with open(tmp, "wb") as f:
        for _ in range(lines):
            f.write(bytes(rng.choice(alphabet) for _ in range(64)) * 128 + b"\n")
    os.rename(tmp, os.path.join(spool, "junk.txt"))
    out["bytes"] = lines * (64 * 128 + 1)


ABUSER_UID = 65534   # nobody: the other member, when run as root


def socket_abusers(args, path: str, hole_port: int, patterns: set, stop: threading.Event, results: dict) -> list:
    """The abusers that talk to the socket: the add flood, the idle subscribers, the data hogs."""
    abusers = []
    if "add" in patterns:
        abusers.append(threading.Thread(target=add_flood, args=(path, hole_port, stop, results["flood"], args.long_urls)))
    if "subscribe" in patterns:
        abusers.append(threading.Thread(target=subscribers, args=(path, 256, stop, results["subs"])))
    if "data" in patterns:
        abusers += [threading.Thread(target=data_hog, args=(path, args.big_url, stop, results["hogs"][i]))
                    for i in range(10)]
    return abusers


def run(args) -> dict:
    root = os.path.join(args.work, "imgd")
    daemon = imgd_daemon.Daemon(args.imgd, root, extra_args=["--disk-limit", "2GiB"])
    daemon.start()
    log(f"imgd pid {daemon.pid}")
    hole = Blackhole()
    with open(args.small_list) as f:
        small = [line.strip() for line in f if line.strip()][:args.small]
    control = daemon.control()
    control.sock.settimeout(120)
    for url in small:
        control.request("get", url=url)
    big = control.request("get", url=args.big_url)
    log(f"warmed {len(small)} small images and the big one ({big['bytes'] / 1e6:.1f} MB)")
    control.close()
    before = imgd_daemon.proc_status(daemon.pid)
    log(f"before the abuse: VmRSS {before['VmRSS'] / MIB:.1f} MiB, VmHWM {before['VmHWM'] / MIB:.1f} MiB")

    stop = threading.Event()
    sampler = Sampler(daemon.pid)
    sampler.start()
    results = {"flood": {}, "hogs": [{} for _ in range(10)], "subs": {}, "junk": {},
               "clients": [{} for _ in range(args.clients)]}
    clients = [threading.Thread(target=well_behaved, args=(daemon.socket, small, stop, results["clients"][i], i))
               for i in range(args.clients)]
    for thread in clients:
        thread.start()
    time.sleep(0.5)   # the well-behaved clients hold their connections before the crowd comes
    patterns = set(args.patterns.split(","))
    # The socket abusers are one other member of the group (uid ABUSER_UID in a forked child)
    # when this runs as root, as on a shared machine: the per-uid cap and the reserve are what
    # keep the well-behaved users in. The junk list is dropped from here (the spool is ours).
    abuser_uid = ABUSER_UID if os.getuid() == 0 and args.abuser_uid else None
    if abuser_uid is not None:
        os.chmod(daemon.root, 0o755)
        os.chown(daemon.socket, 0, abuser_uid)
        results["abuser_uid"] = abuser_uid
    started = time.monotonic()
    child, reader = None, None
    if abuser_uid is None:
        abusers = socket_abusers(args, daemon.socket, hole.port, patterns, stop, results)
        for thread in abusers:
            thread.start()
    else:
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:   # the other member: abuse for the duration, report, exit
            os.close(reader)
            os.setgroups([])
            os.setgid(abuser_uid)
            os.setuid(abuser_uid)
            own_stop = threading.Event()
            abusers = socket_abusers(args, daemon.socket, hole.port, patterns, own_stop, results)
            for thread in abusers:
                thread.start()
            time.sleep(args.duration)
            own_stop.set()
            for thread in abusers:
                thread.join(timeout=120)
            os.write(writer, json.dumps({k: results[k] for k in ("flood", "hogs", "subs")}).encode())
            os._exit(0)
        os.close(writer)
        abusers = []
    junk = threading.Thread(target=junk_list, args=(daemon.spool, args.junk_lines, results["junk"])) \
        if "junk" in patterns else None
    if junk:
        junk.start()
    log(f"abuse running for {args.duration} s" + (f" (socket abusers as uid {abuser_uid})" if abuser_uid is not None else ""))
    time.sleep(args.duration)
    alive = imgd_daemon.alive(daemon.pid)
    status = {}
    if alive:
        try:
            status = imgd_daemon.proc_status(daemon.pid)
        except OSError:
            alive = False
    stop.set()
    for thread in clients + abusers + ([junk] if junk else []):
        thread.join(timeout=120)
    if child is not None:
        data = b""
        while chunk := os.read(reader, 1 << 16):
            data += chunk
        os.close(reader)
        os.waitpid(child, 0)
        results.update(json.loads(data or b"{}"))
    sampler.stop.set()
    sampler.join()
    elapsed = time.monotonic() - started
    results["alive"] = alive
    results["hwm"] = max(sampler.hwm, status.get("VmHWM", 0))
    results["rss_peak"] = sampler.rss_peak
    results["rss_end"] = status.get("VmRSS", 0)
    results["before"] = before
    results["elapsed"] = elapsed
    results["rc"] = daemon.stop(timeout=15)
    hole.sock.close()
    return results


def section(args, r: dict) -> str:
    latencies = [x for c in r["clients"] for x in c.get("latencies", [])]
    answered = sum(c.get("answered", 0) for c in r["clients"])
    unanswered = sum(c.get("unanswered", 0) for c in r["clients"])
    errors = {}
    for c in r["clients"]:
        for code, n in c.get("errors", {}).items():
            errors[code] = errors.get(code, 0) + n
    rss_ok = r["hwm"] < TARGET_KIB
    all_ok = unanswered == 0 and answered > 0
    flood = r["flood"]
    subs = r["subs"]
    ms = lambda v: f"{v * 1000:.1f} ms"  # noqa: E731
    out = [
        "## Abuse load: issue 15's memory patterns at once, 16 well-behaved clients",
        "",
        f"Run {results_md.now()} with `{args.command}`; imgd {args.imgd} "
        f"(git {results_md.git_revision(os.path.dirname(BENCH_DIR))}); settings at their defaults "
        "(`--disk-limit 2GiB` aside).",
        "",
        f"- Machine: {results_md.machine()}",
        f"- Abuse for {args.duration} s: "
        + ("840 `add` × 127 URLs of ~8,000 characters on one connection (half to a port that never answers, half "
           "to port 1, refused and remembered); " if args.long_urls else
           "40 `add` × 30,000 URLs then 20 × 10,000 on one connection (URLs to a port that never answers); ")
        + f"10 connections × 20 pipelined `get data:true` of a {args.big_mb:.0f} MB image, never "
        f"read; a {args.junk_lines:,}-line list of 8 KiB junk; 256 idle `subscribe` connections. "
        + (f"The socket abusers are another member (uid {r['abuser_uid']}); the well-behaved clients root."
           if "abuser_uid" in r else "Abusers and well-behaved clients are the same user."),
        "- RSS: VmHWM of /proc/PID/status (the peak since the daemon started, warm-up included), "
        "sampled every 50 ms with VmRSS.",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| peak RSS (VmHWM) | **{r['hwm'] / MIB:.1f} MiB** (largest VmRSS sample {r['rss_peak'] / MIB:.1f} MiB; "
        f"{r['before'].get('VmRSS', 0) / MIB:.1f} MiB before the abuse, VmHWM then {r['before'].get('VmHWM', 0) / MIB:.1f} MiB) | < 256 MiB: **{'met' if rss_ok else 'MISSED'}** |",
        f"| well-behaved `get`s answered / not answered | **{answered:,} / {unanswered:,}**"
        f"{' (' + ', '.join(f'{k} {v}' for k, v in sorted(errors.items())) + ')' if errors else ''} "
        f"| every one: **{'met' if all_ok else 'MISSED'}** |",
        f"| well-behaved latency p50 / p99 / max | {ms(results_md.percentile(latencies, 0.5))} / "
        f"{ms(results_md.percentile(latencies, 0.99))} / {ms(max(latencies) if latencies else float('nan'))} | |",
        f"| add flood: replies | {', '.join(f'{k} {v}' for k, v in sorted(flood.get('replies', {}).items())) or 'none'}; "
        f"{flood.get('accepted_urls', 0):,} URLs taken{'; error: ' + flood['error'] if 'error' in flood else ''} | |",
        f"| idle subscribers | {subs.get('subscribed', 0)} subscribed, {subs.get('busy', 0)} refused `busy`, "
        f"{subs.get('failed', 0)} failed"
        f"{' (' + ', '.join(f'{k} {v}' for k, v in sorted(subs.get('failed_kinds', {}).items())) + ')' if subs.get('failed') else ''} | |",
        f"| daemon | {'alive' if r['alive'] else 'DIED'} at the end; exit {r['rc']} after SIGTERM | |",
        "",
    ]
    for code, message in sorted(flood.get("messages", {}).items()):
        out.append(f"- `{code}`: {message}")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imgd", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--small-list", required=True)
    parser.add_argument("--big-url", required=True)
    parser.add_argument("--big-mb", type=float, default=40)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--junk-lines", type=int, default=10_000)
    parser.add_argument("--patterns", default="add,data,junk,subscribe",
                        help="which abusers run (a subset, to see what each costs)")
    parser.add_argument("--no-other-user", dest="abuser_uid", action="store_false",
                        help="run the socket abusers as this user too (default as root: as uid 65534)")
    parser.add_argument("--long-urls", action="store_true",
                        help="the add flood sends URLs of ~8,000 characters (held-request and failure-memory bytes)")
    parser.add_argument("--results")
    parser.add_argument("--command", default="bench/abuse-load.sh")
    args = parser.parse_args()
    results = run(args)
    text = section(args, results)
    # Each variant keeps its own section: the long-URL run does not replace the default one.
    marker = "abuse-load-long-urls" if args.long_urls else "abuse-load"
    results_md.publish(text, args.results, marker, "bench/abuse-load.sh", log)
    answered_all = all(c.get("unanswered", 0) == 0 for c in results["clients"])
    sys.exit(0 if results["hwm"] < TARGET_KIB and answered_all and results["alive"] else 1)


if __name__ == "__main__":
    main()
