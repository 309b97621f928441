#!/usr/bin/env python3
"""Start-up to READY with a large cache index (Python 3 stdlib only). Run by ready-bench.sh.

  ready_bench.py --imgd BIN --work DIR [--entries 1000000] [--runs 5] [--results RESULTS.md]
                 [--no-cold] [--args "..."]

Makes an index of N entries with make_index.py (once, kept as DIR/pristine/index.sqlite), then,
R rounds, interleaved:
  empty        imgd on an empty cache folder (the start-up cost without an index);
  N, warm      a fresh copy of the N-entry index (so its pages are in the page cache);
  N, cold      the same after `sync; echo 3 > /proc/sys/vm/drop_caches` (the index, the
               binary and its libraries all read from disk; skipped with --no-cold or where
               drop_caches cannot be written).
Each run: a fresh spool, state and cache folder; a Unix datagram socket bound by this script
and passed as NOTIFY_SOCKET; the clock starts just before fork/exec of imgd and stops when a
datagram carrying READY=1 arrives. Then, untimed: `status` over the control socket must count
the N entries, and SIGTERM must stop imgd with status 0 (the stop time is reported too).
"""
import argparse
import os
import select
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True   # no bench/__pycache__ beside the sources
import imgd_daemon  # noqa: E402
import results_md  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


def log(message: str) -> None:
    print(f"[ready {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def schema_objects(path: str) -> set:
    # Closed explicitly: sqlite3's `with` ends a transaction, not the connection, and an open
    # one would keep the run's deleted copy (200 MiB) on the small data image.
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in db.execute("SELECT type || ' ' || name FROM sqlite_master")}
    finally:
        db.close()


def check_schema(pristine: str, opened: str) -> None:
    """make_index.py repeats CacheIndex's schema: if imgd had to add anything when it opened
    the copy (an index it builds over every row), the READY figure would include that one-time
    work, so the run is refused rather than reported."""
    added = schema_objects(opened) - schema_objects(pristine)
    if added:
        raise RuntimeError(f"imgd added {', '.join(sorted(added))} to the index made by make_index.py: "
                           "bring make_index.py's schema in step with CacheIndex's")


def one_run(binary: str, work: str, pristine: str, entries: int, cold: bool, extra: list) -> dict:
    root = os.path.join(work, "run")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "cache"))
    if pristine:
        shutil.copyfile(pristine, os.path.join(root, "cache", "index.sqlite"))
    os.sync()
    if cold and not drop_caches():
        raise RuntimeError("cannot write /proc/sys/vm/drop_caches")
    notify_path = os.path.join(work, "notify.sock")
    if os.path.exists(notify_path):
        os.remove(notify_path)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    daemon = imgd_daemon.Daemon(binary, root, extra, env={"NOTIFY_SOCKET": notify_path})
    messages = []
    try:
        start = time.monotonic()
        daemon.start(wait=False)
        ready = None
        deadline = start + 60
        while ready is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError("no READY=1 within 60 s")
            readable, _, _ = select.select([notify], [], [], min(remaining, 0.5))
            if not readable:
                if daemon.process.poll() is not None:
                    raise RuntimeError(f"imgd exited with status {daemon.process.returncode} before READY=1 "
                                       f"(log: {daemon.log_path})")
                continue
            data = notify.recv(65536)
            now = time.monotonic()
            messages.append(data.decode(errors="replace"))
            if "READY=1" in data.decode(errors="replace").split("\n"):
                ready = now - start
        control = daemon.control()
        status = control.request("status")
        control.close()
        rc, stopped = daemon.timed_stop()
    finally:
        daemon.stop()
        notify.close()
        os.remove(notify_path)
    seen = status["cache"]["entries"]
    if rc != 0:
        raise RuntimeError(f"imgd exited with status {rc} after SIGTERM (log: {daemon.log_path})")
    if seen != entries:
        raise RuntimeError(f"status counted {seen} entries, expected {entries}")
    if pristine:
        check_schema(pristine, os.path.join(root, "cache", "index.sqlite"))
    return {"ready": ready, "stop": stopped, "entries": seen, "first": messages[0].split("\n")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imgd", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-cold", action="store_true")
    parser.add_argument("--results")
    parser.add_argument("--fs", default="", help="description of the work folder's filesystem")
    parser.add_argument("--command", default="bench/ready-bench.sh")
    parser.add_argument("--keep-dir", help="where the N-entry index is kept between invocations")
    args = parser.parse_args()

    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    # Made once and kept (a minute or two per million rows) while its rows are younger than
    # 3 days: they must stay well inside the daemon's 7-day --max-age.
    keep = args.keep_dir or os.path.join(work, "pristine")
    pristine = os.path.join(keep, f"index-{args.entries}.sqlite")
    made_by = os.path.join(BENCH_DIR, "make_index.py")
    if (os.path.exists(pristine) and time.time() - os.path.getmtime(pristine) < 3 * 86400
            and os.path.getmtime(pristine) > os.path.getmtime(made_by)):
        made_text = f"kept from {time.strftime('%Y-%m-%d %H:%M', time.gmtime(os.path.getmtime(pristine)))} UTC"
        log(f"using the index made before: {pristine}")
    else:
        log(f"making an index of {args.entries} entries: {pristine}")
        made = subprocess.run([sys.executable, os.path.join(BENCH_DIR, "make_index.py"), "--out", pristine,
                               "--entries", str(args.entries)], check=True, capture_output=True, text=True)
        made_text = made.stdout.strip()
        log(made_text)
    index_bytes = os.path.getsize(pristine)
    # Room for every recorded byte (the files do not exist; only the budget counts them), so the
    # start does not begin evicting; see bench/README.md.
    extra = ["--disk-limit", "1000GiB"]

    variants = [("empty cache", None, 0, False), (f"{args.entries:,} entries, page cache warm", pristine,
                                                  args.entries, False)]
    cold_note = ""
    if not args.no_cold:
        if drop_caches():
            variants.append((f"{args.entries:,} entries, page cache dropped", pristine, args.entries, True))
        else:
            cold_note = "The cold variant was skipped: /proc/sys/vm/drop_caches cannot be written here."
            log(cold_note)
    results = {name: [] for name, *_ in variants}
    stops = {name: [] for name, *_ in variants}
    failures = []
    first_datagram = None
    for run in range(1, args.runs + 1):
        for name, source, entries, cold in variants:
            try:
                r = one_run(args.imgd, work, source, entries, cold, extra)
            except (RuntimeError, OSError) as error:
                failures.append(f"{name}, run {run}: {error}")
                log(f"{name}, run {run}/{args.runs}: FAILED — {error}")
                continue
            results[name].append(r["ready"])
            stops[name].append(r["stop"])
            first_datagram = first_datagram or r["first"]
            log(f"{name:<40} run {run}/{args.runs}: READY after {r['ready'] * 1000:7.1f} ms "
                f"(status: {r['entries']} entries; SIGTERM → exit {r['stop'] * 1000:.0f} ms)")
    shutil.rmtree(os.path.join(work, "run"), ignore_errors=True)

    rows = ["| cache | ok runs | exec → READY=1, median (min–max) | SIGTERM → exit, median |", "|---|---|---|---|"]
    for name, *_ in variants:
        values = results[name]
        if values:
            rows.append(f"| {name} | {len(values)}/{args.runs} | {statistics.median(values) * 1000:.1f} ms "
                        f"({min(values) * 1000:.1f}–{max(values) * 1000:.1f}) "
                        f"| {statistics.median(stops[name]) * 1000:.0f} ms |")
        else:
            rows.append(f"| {name} | 0/{args.runs} | FAILED | |")
    big = results.get(variants[1][0], [])
    verdict = "no successful run"
    if big:
        median = statistics.median(big)
        verdict = f"{'met' if median <= 1.0 else 'MISSED'} ({median * 1000:.0f} ms with the page cache warm"
        cold = [v for (name, _, _, c) in variants if c for v in results[name]]
        if cold:
            verdict += f"; {statistics.median(cold) * 1000:.0f} ms after dropping the page cache"
        verdict += ")"
    body = [
        f"## Start-up to READY: {args.entries:,} entries",
        "",
        f"Run {results_md.now()} with `{args.command}`; imgd {args.imgd} (git {results_md.git_revision(os.path.dirname(BENCH_DIR))}).",
        "",
        f"- Machine: {results_md.machine()}",
        f"- Cache, state and spool on: {args.fs or results_md.filesystem(work)}",
        f"- Index: {args.entries:,} synthetic rows made by `bench/make_index.py` with CacheIndex's schema "
        f"(rows only, no image files; marked as cleanly closed): **{index_bytes / 2**20:.0f} MiB** "
        f"({index_bytes:,} bytes); {made_text}.",
        f"- imgd flags: `--spool --cache --state --socket` (fresh folders each run) `{' '.join(extra)}` "
        "(the rows record far more than the default 1 GiB cap; a cap below their total would start an eviction)",
        f"- R={args.runs} rounds, variants interleaved. Timed from just before fork/exec of `imgd` to the arrival "
        "of the `READY=1` datagram on the NOTIFY_SOCKET this script bound; then `status` had to count "
        "every entry and SIGTERM had to stop imgd with status 0.",
        "",
        "\n".join(rows),
        "",
        f"Target READY ≤ 1 s with {args.entries:,} entries: **{verdict}**.",
    ]
    if first_datagram:
        body += ["", f"First notification datagram: `{' | '.join(l for l in first_datagram if l)}`."]
    if cold_note:
        body += ["", cold_note]
    if failures:
        body += ["", "Failed runs:", ""] + [f"- {f}" for f in failures]
    text = "\n".join(body) + "\n"
    results_md.publish(text, args.results, "ready-bench", "bench/ready-bench.sh", log)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
