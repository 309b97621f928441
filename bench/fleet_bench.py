"""The fleet benchmark's driver (bench/fleet-bench.sh): N imgd daemons on this machine, each
with its own folders, warm the same list from a local origin that delays every response by a
fixed time (a remote origin's round trip), once behind the shared nginx tier (contrib/fleet/)
and once without it. Per variant: origin requests per URL, and the p50 and p99 of the daemons'
list completion times (drop to list_done). Python 3 stdlib only."""
import argparse, asyncio, json, os, shutil, socket, statistics, subprocess, sys, threading, time


class DelayedOrigin:
    """An HTTP/1.1 origin on 127.0.0.1 serving files under ROOT after DELAY seconds, keep-alive,
    counting requests by path (on its own thread and event loop)."""

    def __init__(self, root, delay):
        self.root, self.delay, self.count, self.paths = root, delay, 0, {}
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.sock = sock
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, sock=self.sock, backlog=1024))
        self.loop.run_forever()

    async def _serve(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                target = head.split(b" ", 2)[1].decode()
                self.count += 1
                self.paths[target] = self.paths.get(target, 0) + 1
                await asyncio.sleep(self.delay)
                path = os.path.normpath(os.path.join(self.root, target.split("?")[0].lstrip("/")))
                try:
                    body = open(path, "rb").read() if path.startswith(self.root) else None
                except OSError:
                    body = None
                if body is None:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: %d\r\n"
                                 b"Cache-Control: max-age=3600\r\n\r\n" % len(body) + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def reset(self):
        self.count, self.paths = 0, {}


def run_fleet(args, count, tier_url, urls_file, work):
    """Starts COUNT daemons, drops the list into each at once, returns their completion times."""
    shutil.rmtree(work, ignore_errors=True)
    daemons, sockets = [], []
    for i in range(count):
        root = f"{work}/d{i}"
        os.makedirs(root)
        sock = f"{root}/imgd.sock"
        command = [args.imgd, "--spool", f"{root}/spool", "--cache", f"{root}/cache", "--state", f"{root}/state",
                   "--socket", sock, "--max-parallel", str(args.parallel), "--max-per-host", str(args.parallel),
                   "--courtesy", "false", "--disk-limit", "2GiB"]
        if tier_url:
            command += ["--tier", tier_url]
        daemons.append(subprocess.Popen(command, stdout=open(f"{root}/imgd.log", "w"), stderr=subprocess.STDOUT))
        sockets.append(sock)
    with open(args.pidfile, "w") as f:
        f.write("\n".join(str(d.pid) for d in daemons))
    try:
        for sock in sockets:
            deadline = time.time() + 30
            while not os.path.exists(sock):
                if time.time() > deadline:
                    sys.exit(f"imgd did not start: {sock}")
                time.sleep(0.05)
        start = time.time()
        times = [float("nan")] * count
        outcomes = [None] * count

        def warm(i):
            # imgctl warm --wait returns at the list's list_done: that daemon's completion.
            done = subprocess.run([args.imgctl, "--socket", sockets[i], "warm", urls_file, "--wait"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[i] = time.time() - start
            outcomes[i] = done.returncode

        threads = [threading.Thread(target=warm, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if any(outcome != 0 for outcome in outcomes):
            print(f"warning: a list did not finish done (imgctl exit statuses {outcomes})", file=sys.stderr)
        return times
    finally:
        for d in daemons:
            d.terminate()
        for d in daemons:
            d.wait()
        os.unlink(args.pidfile)


def call(sock, request):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(json.dumps(request).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    s.close()
    return json.loads(data)


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--imgd", required=True)
    parser.add_argument("--imgctl", required=True)
    parser.add_argument("--corpus", required=True, help="folder of s/<xx>/sNNNNNN.png files")
    parser.add_argument("--urls", type=int, default=5000)
    parser.add_argument("--delay-ms", type=float, default=20)
    parser.add_argument("--counts", default="1,4,8")
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--tier-port", type=int, required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--pidfile", required=True)
    args = parser.parse_args()

    files = sorted(os.path.relpath(os.path.join(d, f), args.corpus)
                   for d, _, fs in os.walk(os.path.join(args.corpus, "s")) for f in fs)[: args.urls]
    origin = DelayedOrigin(os.path.abspath(args.corpus), args.delay_ms / 1000)
    urls_file = os.path.join(args.work, "fleet.txt")
    os.makedirs(args.work, exist_ok=True)
    rows = []
    for count in [int(c) for c in args.counts.split(",")]:
        for variant in ("tier", "direct"):
            # A fresh URL set per run (a query naming the run): neither the tier nor a daemon has any.
            tag = f"{variant}-{count}-{int(time.time())}"
            with open(urls_file, "w") as f:
                f.writelines(f"http://127.0.0.1:{origin.port}/{path}?run={tag}\n" for path in files)
            origin.reset()
            tier_url = f"http://127.0.0.1:{args.tier_port}" if variant == "tier" else None
            times = run_fleet(args, count, tier_url, urls_file, os.path.join(args.work, "run"))
            per_url = origin.count / len(files)
            p50, p99 = statistics.median(times), percentile(times, 0.99)
            rows.append((count, variant, per_url, p50, p99))
            print(f"{count} daemons, {variant}: {per_url:.3f} origin requests per URL, p50 {p50:.2f} s, p99 {p99:.2f} s",
                  file=sys.stderr)
    print("| daemons | path | origin requests per URL | list completion p50 | p99 | p99/p50 |")
    print("|---|---|---|---|---|---|")
    for count, variant, per_url, p50, p99 in rows:
        print(f"| {count} | {'nginx tier' if variant == 'tier' else 'origin directly'} | {per_url:.3f} | {p50:.2f} s | {p99:.2f} s | {p99 / p50:.2f} |")


if __name__ == "__main__":
    main()
