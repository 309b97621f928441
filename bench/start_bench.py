#!/usr/bin/env python3
"""The start benchmark's driver (bench/start-bench.sh sets up nginx and the binaries; Python 3
stdlib only).

Starts an imgd daemon on fresh folders under --work, caches one image from nginx through it,
fills a second cache with `imgd prefetch`, then times whole processes, interleaved pair by pair
(A B A B ...), each run's CPU (user + sys) and peak RSS from the kernel's own accounting of the
finished child (CPU from wait4, peak from `/usr/bin/time -f %M`), its wall time from a
monotonic clock around spawn and reap:

  get     `imgctl get --no-fetch -o F URL` against the daemon  /  `curl -s -o F URL` from nginx
  help    `imgctl --help`                                       /  `curl --version`
  prefetch `imgd prefetch EMPTY --cache C` on the filled cache  /  `true` (the spawn's own cost)

With --base DIR (a folder holding another build's imgd and imgctl), the same commands of that
build are paired with this one's too ("new / base").
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import imgd_daemon  # noqa: E402
import results_md  # noqa: E402

WORK = ""  # --work, where each run's peak is written


def log(message: str) -> None:
    print(f"[start-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_once(argv, rss_file: str) -> dict:
    """One whole process: wall seconds, CPU seconds (user + sys) and peak RSS in KiB.

    Run under `/usr/bin/time -f %M`: a child spawned by this (16 MiB) Python would report
    Python's RSS as its peak, since exec carries the spawning process's high-water mark over;
    time's own is ~2 MiB, and %M is the command's alone. CPU is what wait4 reports for time
    and the command together (time's own share is a fraction of a millisecond, as it is for
    every command here alike)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        start = time.monotonic()
        pid = os.posix_spawn("/usr/bin/time", ["/usr/bin/time", "-f", "%M", "-o", rss_file, *argv], os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
                                           (os.POSIX_SPAWN_DUP2, devnull, 2)])
        _, status, usage = os.wait4(pid, 0)
        wall = time.monotonic() - start
    finally:
        os.close(devnull)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {code}")
    with open(rss_file) as f:
        rss = int(f.read().split()[-1])
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": rss}


def paired(a, b, runs: int, warmup: int = 2) -> dict:
    """A and B in turn, runs times each after warmup unrecorded pairs."""
    rss = os.path.join(WORK, "rss.txt")
    for _ in range(warmup):
        run_once(a, rss)
        run_once(b, rss)
    rows = []
    for _ in range(runs):
        rows.append((run_once(a, rss), run_once(b, rss)))
    return {"a": [r[0] for r in rows], "b": [r[1] for r in rows]}


def spread(values, scale=1.0, digits=1) -> str:
    """median (min–max)."""
    fmt = f"{{:.{digits}f}}"
    return f"{fmt.format(statistics.median(values) * scale)} ({fmt.format(min(values) * scale)}–{fmt.format(max(values) * scale)})"


def ratios(pair: dict, key: str) -> list:
    return [x[key] / y[key] for x, y in zip(pair["a"], pair["b"]) if y[key] > 0]


def row(name: str, a_name: str, b_name: str, pair: dict) -> str:
    a, b = pair["a"], pair["b"]
    return (f"| {name} | {a_name} | {spread([r['wall'] for r in a], 1000)} | {spread([r['cpu'] for r in a], 1000)} "
            f"| {spread([r['rss'] for r in a], 1 / 1024)} "
            f"| {b_name} | {spread([r['wall'] for r in b], 1000)} | {spread([r['cpu'] for r in b], 1000)} "
            f"| {spread([r['rss'] for r in b], 1 / 1024)} "
            f"| {spread(ratios(pair, 'wall'), digits=2)} | {spread(ratios(pair, 'cpu'), digits=2)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imgd", required=True)
    parser.add_argument("--imgctl", required=True)
    parser.add_argument("--base", help="a folder with another build's imgd and imgctl")
    parser.add_argument("--floor", help="bench/floor/start_floor.c built: the floor of an empty prefetch")
    parser.add_argument("--url", required=True, help="one image nginx serves")
    parser.add_argument("--work", required=True, help="a fresh folder for the daemon, the caches, the outputs")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--fs", default="")
    parser.add_argument("--results")
    parser.add_argument("--command", default="bench/start-bench.sh")
    args = parser.parse_args()

    global WORK
    work = WORK = args.work
    out = os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    empty = os.path.join(work, "empty.txt")
    open(empty, "w").close()
    one = os.path.join(work, "one.txt")
    with open(one, "w") as f:
        f.write(args.url + "\n")

    daemon = imgd_daemon.Daemon(args.imgd, os.path.join(work, "imgd"))
    daemon.start()
    try:
        # The image cached through the daemon, so every timed get is a hit served from disk.
        control = daemon.control()
        cached = control.request("get", url=args.url)
        control.close()
        log(f"daemon (pid {daemon.pid}) cached {args.url}: {cached.get('bytes')} bytes")
        cache = os.path.join(work, "prefetch-cache")
        run_once([args.imgd, "prefetch", one, "--cache", cache], os.path.join(work, "rss.txt"))
        # Read once so no timed run pays for a cold page cache.
        run_once([args.imgctl, "get", "--socket", daemon.socket, "--no-fetch", "-o", os.path.join(out, "warm.png"), args.url],
                 os.path.join(work, "rss.txt"))

        def get(binary, name):
            return [binary, "get", "--socket", daemon.socket, "--no-fetch", "-o", os.path.join(out, name), args.url]

        curl = ["/usr/bin/curl", "-q", "-s", "--fail", "-o", os.path.join(out, "curl.png"), args.url]
        prefetch = [args.imgd, "prefetch", empty, "--cache", cache]
        true = ["/bin/true"]
        rows = []
        log(f"get vs curl, {args.runs} pairs")
        rows.append(row("one cached image to a file", "imgctl get --no-fetch -o F", "curl -o F", paired(get(args.imgctl, "imgctl.png"), curl, args.runs)))
        log(f"--help vs --version, {args.runs} pairs")
        rows.append(row("start and print help", "imgctl --help", "curl --version", paired([args.imgctl, "--help"], ["/usr/bin/curl", "--version"], args.runs)))
        log(f"prefetch of an empty list, {args.runs} pairs")
        rows.append(row("empty list, existing cache", "imgd prefetch EMPTY", "true", paired(prefetch, true, args.runs)))
        if args.floor:
            log(f"prefetch of an empty list vs the floor (libcurl, OpenSSL and SQLite loaded and set up), {args.runs} pairs")
            rows.append(row("empty list, existing cache: the floor", "imgd prefetch EMPTY", "start-floor INDEX",
                            paired(prefetch, [args.floor, os.path.join(cache, "index.sqlite")], args.runs)))
        if args.base:
            base_imgd, base_imgctl = os.path.join(args.base, "imgd"), os.path.join(args.base, "imgctl")
            log(f"this build against {args.base}, {args.runs} pairs each")
            rows.append(row("get, new / base", "new", "base", paired(get(args.imgctl, "imgctl.png"), get(base_imgctl, "base.png"), args.runs)))
            rows.append(row("--help, new / base", "new", "base", paired([args.imgctl, "--help"], [base_imgctl, "--help"], args.runs)))
            rows.append(row("prefetch EMPTY, new / base", "new", "base",
                            paired(prefetch, [base_imgd, "prefetch", empty, "--cache", cache], args.runs)))
    finally:
        daemon.stop()

    header = ("| work | A | A wall ms | A CPU ms | A peak MiB | B | B wall ms | B CPU ms | B peak MiB | A/B wall | A/B CPU |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")
    text = "\n".join([
        "## Start: one cached image, help, an empty prefetch (`bench/start-bench.sh`)",
        "",
        f"{results_md.now()}; {results_md.machine()}; imgd {results_md.git_revision(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}; "
        f"{args.fs or results_md.filesystem(work)}.",
        f"Command: `{args.command}`. {args.runs} interleaved pairs per row (A B A B …); median (min–max); "
        "CPU is user + sys and peak the largest RSS, both the kernel's accounting of the finished process "
        "(peak: `/usr/bin/time -f %M`; CPU: wait4, time's own fraction of a ms included on both sides); A/B is taken pair by pair.",
        "",
        header,
        *rows,
    ])
    results_md.publish(text, args.results, "start-bench", "bench/start-bench.sh", log)


if __name__ == "__main__":
    main()
