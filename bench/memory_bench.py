#!/usr/bin/env python3
"""imgd's memory: warming, claiming a huge list, memory pressure (Python 3 stdlib only).
Run by memory-bench.sh, which provides the loop-mounted work folder, nginx and the corpus.

  memory_bench.py --imgd BIN --work DIR --base-list small.txt [--urls 100000]
                  [--claim-lines 1000000] [--pressure-runs 5] [--memory-limit 64MiB]
                  [--cap 16] [--results RESULTS.md] [--parts warm,claim,pressure]

(a) warm: one daemon (`--memory-limit L --max-parallel C --max-per-host C --disk-limit 3GiB`)
    warms a list of U URLs: the small corpus's URLs, each repeated with `?v=K` query strings
    (nginx serves the file and ignores the query; imgd keys the whole URL, so each is its own
    image). VmRSS is sampled from /proc/PID/status every 100 ms from the start until 5 s after
    the list lands in done/. Reported: RSS idle before the drop, the peak (largest sample and
    VmHWM), the median over the middle half of the warming ("steady"), and 5 s after.
(b) claim: a daemon with --max-parallel 1 is handed a list of N lines whose URLs point at a
    port that accepts connections into its backlog and never answers (so at most one transfer
    is in flight and none completes). VmRSS every 20 ms; growth = VmHWM when the
    `list_claimed` event arrives (it is published once every line is in the state database)
    minus the median RSS of the second before the drop.
(c) pressure: a daemon on (a)'s warm cache with MEMORY_PRESSURE_WATCH set to a FIFO made here.
    `get` requests (pipelined, 32 in flight) fill the memory tier to its limit; then one byte
    is written to the FIFO and the time to (1) the `memory_pressure` event on a subscribed
    connection (published after the purge) and (2) a `status` reply showing the tier empty
    (sent right after the event) is taken, with RSS before, right after and 1 s after. A fresh
    daemon each run: after a purge the tier refuses new images for 30 s.
"""
import argparse
import os
import shutil
import socket
import statistics
import sys
import threading
import time

sys.dont_write_bytecode = True   # no bench/__pycache__ beside the sources
import imgd_daemon  # noqa: E402
import results_md  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
MIB = 1024  # KiB per MiB


def log(message: str) -> None:
    print(f"[memory {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Sampler(threading.Thread):
    """VmRSS (KiB) of pid every interval seconds, with monotonic timestamps, until stop()."""

    def __init__(self, pid: int, interval: float):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.samples = []
        self.halt = threading.Event()

    def run(self):
        next_at = time.monotonic()
        while not self.halt.is_set():
            try:
                self.samples.append((time.monotonic(), imgd_daemon.rss_kib(self.pid)))
            except (OSError, KeyError):
                return
            next_at += self.interval
            self.halt.wait(max(0, next_at - time.monotonic()))

    def stop(self):
        self.halt.set()
        self.join()

    def between(self, start: float, end: float) -> list:
        return [rss for t, rss in self.samples if start <= t <= end]


def mib(kib) -> str:
    return f"{kib / MIB:.1f} MiB"


def parse_size(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[:-len(unit)]) * factor)
    return int(text)


# --- (a) warming ---------------------------------------------------------------------------

def make_warm_list(base_list: str, count: int, out: str) -> int:
    with open(base_list) as f:
        base = [line.strip() for line in f if line.strip()]
    written = 0
    with open(out, "w") as f:
        variant = 0
        while written < count:
            for url in base[:count - written]:
                f.write(f"{url}?v={variant}\n")
                written += 1
            variant += 1
    return len(base)


def part_warm(args, work: str) -> dict:
    root = os.path.join(work, "warm")
    shutil.rmtree(root, ignore_errors=True)
    url_list = os.path.join(work, "warm-list.txt")
    distinct = make_warm_list(args.base_list, args.urls, url_list)
    flags = ["--memory-limit", args.memory_limit, "--max-parallel", str(args.cap), "--max-per-host", str(args.cap),
             "--disk-limit", "3GiB"]
    daemon = imgd_daemon.Daemon(args.imgd, root, flags)
    daemon.start()
    sampler = Sampler(daemon.pid, 0.1)
    sampler.start()
    try:
        time.sleep(1.0)
        before_end = time.monotonic()
        start = time.monotonic()
        imgd_daemon.drop_list(daemon.spool, url_list, "warm.txt")
        outcome = imgd_daemon.wait_landed(daemon.spool, "warm.txt", 1800, 0.05, daemon.pid)
        done = time.monotonic()
        hwm = imgd_daemon.proc_status(daemon.pid)["VmHWM"]
        control = daemon.control()
        status = control.request("status")
        control.close()
        time.sleep(5.0)
        after = imgd_daemon.rss_kib(daemon.pid)
    finally:
        sampler.stop()
        rc = daemon.stop()
    report = {}
    report_path = os.path.join(daemon.spool, outcome if outcome in ("done", "failed") else "done", "warm.txt.report.json")
    if os.path.exists(report_path):
        import json
        with open(report_path) as f:
            report = json.load(f)
    span = done - start
    during = sampler.between(start, done)
    steady = sampler.between(start + span / 4, done - span / 4)
    return {
        "urls": args.urls, "distinct": distinct, "outcome": outcome, "rc": rc, "seconds": span,
        "cached": report.get("cached"), "failed": report.get("failed"), "failed_by_code": report.get("failed_by_code"),
        "bytes": report.get("bytes"),
        "before": statistics.median(sampler.between(0, before_end)), "peak_sample": max(during) if during else 0,
        "hwm": hwm, "steady": statistics.median(steady) if steady else 0, "after": after,
        "samples": len(during), "memory_tier": status["memory"], "flags": flags,
    }


# --- (b) claiming --------------------------------------------------------------------------

def part_claim(args, work: str) -> dict:
    root = os.path.join(work, "claim")
    shutil.rmtree(root, ignore_errors=True)
    # A port that takes connections into its backlog and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    port = silent.getsockname()[1]
    url_list = os.path.join(work, "claim-list.txt")
    with open(url_list, "w") as f:
        for n in range(args.claim_lines):
            f.write(f"http://127.0.0.1:{port}/claim/{n:07d}.png\n")
    list_bytes = os.path.getsize(url_list)
    flags = ["--max-parallel", "1", "--max-per-host", "1"]
    daemon = imgd_daemon.Daemon(args.imgd, root, flags)
    daemon.start()
    sampler = Sampler(daemon.pid, 0.02)
    sampler.start()
    try:
        events = daemon.control()
        events.request("subscribe", events=["list_claimed"])
        time.sleep(1.5)
        before = statistics.median(sampler.between(time.monotonic() - 1.0, time.monotonic()))
        start = time.monotonic()
        imgd_daemon.drop_list(daemon.spool, url_list, "claim.txt")
        events.sock.settimeout(1800)
        event = events.event("list_claimed")
        claimed = time.monotonic()
        hwm = imgd_daemon.proc_status(daemon.pid)["VmHWM"]
        time.sleep(3.0)
        later = imgd_daemon.rss_kib(daemon.pid)
        hwm_later = imgd_daemon.proc_status(daemon.pid)["VmHWM"]
        events.close()
        rc, stop_s = daemon.timed_stop()
    finally:
        sampler.stop()
        daemon.stop()
        silent.close()
        os.remove(url_list)
    during = sampler.between(start, claimed)
    return {
        "lines": args.claim_lines, "list_mib": list_bytes / 2**20, "total": event["data"].get("total"),
        "seconds": claimed - start, "before": before, "peak_sample": max(during) if during else 0, "hwm": hwm,
        "growth": hwm - before, "later": later, "hwm_later": hwm_later, "rc": rc, "stop_s": stop_s, "flags": flags,
    }


# --- (c) memory pressure -------------------------------------------------------------------

def fill_memory_tier(control, urls: list, window: int = 32) -> int:
    """Pipelined `get`s (window in flight); returns how many succeeded."""
    ok = sent = received = 0
    while received < len(urls):
        while sent < len(urls) and sent - received < window:
            control.send("get", url=urls[sent])
            sent += 1
        reply = control.reply()
        received += 1
        ok += 1 if reply.get("ok") else 0
    return ok


def part_pressure(args, work: str) -> dict:
    root = os.path.join(work, "warm")    # (a)'s cache, state and spool
    if not os.path.isdir(os.path.join(root, "cache")):
        raise RuntimeError("the pressure part needs the warm part's cache: run --parts warm,pressure")
    fifo = os.path.join(work, "pressure.fifo")
    if os.path.exists(fifo):
        os.remove(fifo)
    os.mkfifo(fifo)
    with open(os.path.join(work, "warm-list.txt")) as f:
        urls = [line.strip() for line in f][:8000]
    flags = ["--memory-limit", args.memory_limit, "--disk-limit", "3GiB"]
    runs = []
    for run in range(1, args.pressure_runs + 1):
        daemon = imgd_daemon.Daemon(args.imgd, root, flags, env={"MEMORY_PRESSURE_WATCH": fifo},
                                    log_path=os.path.join(work, f"pressure-{run}.log"))
        daemon.start()
        try:
            control = daemon.control()
            got = fill_memory_tier(control, urls)
            asked = time.monotonic()
            status = control.request("status")
            status_cost = time.monotonic() - asked
            events = daemon.control()
            events.request("subscribe", events=["memory_pressure"])
            time.sleep(1.0)
            rss_before = imgd_daemon.rss_kib(daemon.pid)
            start = time.monotonic()
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(writer, b"x")
            os.close(writer)
            event = events.event("memory_pressure")
            evented = time.monotonic()
            after = control.request("status")
            confirmed = time.monotonic()
            polls = 0
            while after["memory"]["entries"] != 0 and time.monotonic() - start < 10:
                polls += 1
                after = control.request("status")
            emptied = time.monotonic()
            rss_right_after = imgd_daemon.rss_kib(daemon.pid)
            time.sleep(1.0)
            rss_later = imgd_daemon.rss_kib(daemon.pid)
            control.close()
            events.close()
        finally:
            rc = daemon.stop()
        r = {"gets_ok": got, "tier_bytes": status["memory"]["bytes"], "tier_entries": status["memory"]["entries"],
             "limit": status["memory"]["limit"], "event_s": evented - start, "status_s": confirmed - start,
             "empty_s": emptied - start, "extra_polls": polls, "status_cost": status_cost, "after_entries": after["memory"]["entries"],
             "after_bytes": after["memory"]["bytes"], "purged": event["data"].get("purged_bytes"),
             "origin": event["data"].get("origin"), "rss_before": rss_before, "rss_right_after": rss_right_after,
             "rss_later": rss_later, "rc": rc}
        log(f"pressure run {run}/{args.pressure_runs}: tier {r['tier_entries']} images, {r['tier_bytes'] / 2**20:.1f} MiB; "
            f"event after {r['event_s'] * 1000:.2f} ms, status empty after {r['status_s'] * 1000:.2f} ms; "
            f"RSS {mib(rss_before)} → {mib(rss_right_after)} → {mib(rss_later)} (1 s later)")
        runs.append(r)
    os.remove(fifo)
    return {"runs": runs, "flags": flags}


# --- Report --------------------------------------------------------------------------------

def section(args, fs: str, warm, claim, pressure, failures) -> str:
    limit_mib = parse_size(args.memory_limit) / 2**20
    target_kib = (48 + limit_mib) * MIB
    out = [
        "## Memory: warming, claiming a huge list, memory pressure",
        "",
        f"Run {results_md.now()} with `{args.command}`; imgd {args.imgd} "
        f"(git {results_md.git_revision(os.path.dirname(BENCH_DIR))}).",
        "",
        f"- Machine: {results_md.machine()}",
        f"- Cache, state and spool on: {fs or results_md.filesystem(args.work)}",
        f"- Memory-tier limit: **{args.memory_limit}** (`--memory-limit`; imgd's default), so the warming "
        f"target is ≤ 48 MiB + {limit_mib:.0f} MiB = {target_kib / MIB:.0f} MiB",
        "- RSS is VmRSS of /proc/PID/status, sampled by a thread of the driver; peak is also VmHWM "
        "(the kernel's exact high-water mark). See bench/README.md.",
        "",
        "| measure | value | target |",
        "|---|---|---|",
    ]
    if warm:
        w = warm
        ok = w["outcome"] == "done" and w["rc"] == 0
        met = "met" if ok and w["hwm"] <= target_kib else "MISSED"
        out += [
            f"| (a) warm {w['urls']:,} URLs ({w['distinct']:,} files × `?v=K`), cap {args.cap}: outcome | "
            f"{w['outcome']}: {w['cached']} cached, {w['failed']} failed {w['failed_by_code'] or ''} in {w['seconds']:.1f} s "
            f"({w['urls'] / w['seconds']:.0f} URLs/s, {(w['bytes'] or 0) / 1e6:.0f} MB); exit {w['rc']} | |",
            f"| (a) RSS idle before the drop | {mib(w['before'])} | |",
            f"| (a) RSS while warming: steady (median of the middle half, {w['samples']} samples at 100 ms) | {mib(w['steady'])} | |",
            f"| (a) RSS while warming: peak (largest sample / VmHWM) | {mib(w['peak_sample'])} / **{mib(w['hwm'])}** "
            f"| ≤ {target_kib / MIB:.0f} MiB: **{met}** |",
            f"| (a) RSS 5 s after the list landed; memory tier then | {mib(w['after'])}; {w['memory_tier']['entries']} images, "
            f"{w['memory_tier']['bytes'] / 2**20:.1f} MiB | |",
        ]
    if claim:
        c = claim
        met = "met" if c["growth"] < 50 * MIB and c["total"] == c["lines"] else "MISSED"
        out += [
            f"| (b) claim a {c['lines']:,}-line list ({c['list_mib']:.0f} MiB, `--max-parallel 1`, URLs to a port "
            f"that never answers): time to `list_claimed` | {c['seconds']:.1f} s ({c['lines'] / c['seconds']:,.0f} lines/s; "
            f"event total {c['total']}) | |",
            f"| (b) RSS before the drop → peak while claiming (largest 20 ms sample / VmHWM) | {mib(c['before'])} → "
            f"{mib(c['peak_sample'])} / {mib(c['hwm'])} | |",
            f"| (b) RSS growth while claiming (VmHWM − before) | **{mib(c['growth'])}** | < 50 MiB: **{met}** |",
            f"| (b) RSS 3 s after the claim (VmHWM then) | {mib(c['later'])} ({mib(c['hwm_later'])}) | |",
            f"| (b) SIGTERM → exit with {c['lines']:,} URLs pending | {c['stop_s'] * 1000:.0f} ms, status {c['rc']} | ≤ 5 s |",
        ]
    if pressure and pressure["runs"]:
        rs = pressure["runs"]
        ev = [r["event_s"] * 1000 for r in rs]
        st = [r["status_s"] * 1000 for r in rs]
        empty_all = all(r["after_entries"] == 0 for r in rs)
        met = "met" if empty_all and statistics.median(ev) < 100 else "MISSED"
        cost = [r["status_cost"] * 1000 for r in rs]
        out += [
            f"| (c) memory tier filled by `get` ({len(rs)} runs, fresh daemon each) | "
            f"{statistics.median(r['tier_entries'] for r in rs):.0f} images, "
            f"{statistics.median(r['tier_bytes'] for r in rs) / 2**20:.1f} MiB of {rs[0]['limit'] / 2**20:.0f} MiB | |",
            f"| (c) byte written to the FIFO → `memory_pressure` event received (published after the purge), "
            f"median (min–max) | **{statistics.median(ev):.2f} ms** ({min(ev):.2f}–{max(ev):.2f}) | < 100 ms: **{met}** |",
            f"| (c) byte written → reply of a `status` sent after the event, median (min–max); tier empty in it | "
            f"{statistics.median(st):.2f} ms ({min(st):.2f}–{max(st):.2f}); "
            f"{sum(r['after_entries'] == 0 for r in rs)}/{len(rs)} runs | |",
            f"| (c) one `status` request alone, before the event (it sums pinned bytes over the index of pinned rows), median | "
            f"{statistics.median(cost):.2f} ms | |",
            f"| (c) RSS before → right after → 1 s after, medians | {mib(statistics.median(r['rss_before'] for r in rs))} → "
            f"{mib(statistics.median(r['rss_right_after'] for r in rs))} → {mib(statistics.median(r['rss_later'] for r in rs))} | |",
        ]
    out.append("")
    if warm:
        out.append(f"(a) flags: `{' '.join(warm['flags'])}`. ")
    if claim:
        out.append(f"(b) flags: `{' '.join(claim['flags'])}`. ")
    if pressure:
        out.append(f"(c) flags: `{' '.join(pressure['flags'])}`, `MEMORY_PRESSURE_WATCH=<FIFO>`, on (a)'s cache "
                   f"({warm['urls'] if warm else '?'} entries). The event is published after the purge and "
                   "`malloc_trim(0)`, so its arrival bounds the time to an empty tier from above (plus its trip "
                   "through the control socket); the target uses it. The `status` figure adds one `status` "
                   "request, whose cost grows with the index (see the line above).")
    if pressure and pressure["runs"]:
        out += ["", "<details><summary>(c) every run</summary>", "",
                "| run | tier images | tier MiB | event ms | status-empty ms | status alone ms | purged bytes | RSS before / after / 1 s MiB | exit |",
                "|---|---|---|---|---|---|---|---|---|"]
        for i, r in enumerate(pressure["runs"], 1):
            out.append(f"| {i} | {r['tier_entries']} | {r['tier_bytes'] / 2**20:.1f} | {r['event_s'] * 1000:.2f} "
                       f"| {r['status_s'] * 1000:.2f} | {r['status_cost'] * 1000:.2f} | {r['purged']} | {r['rss_before'] / MIB:.1f} / "
                       f"{r['rss_right_after'] / MIB:.1f} / {r['rss_later'] / MIB:.1f} | {r['rc']} |")
        out += ["", "</details>"]
    if failures:
        out += ["", "Failed parts:", ""] + [f"- {f}" for f in failures]
    return "\n".join(out) + "\n"


def run_part(tag: str, name: str, failures: list, part, verdict):
    """Runs one part and returns its figures. verdict(figures) gives a log line (or None) and
    the part's failures, which are added to failures; an error the part raises is its failure
    too (listed in the section, logged), and None lets the other parts still run."""
    try:
        figures = part()
    except (RuntimeError, OSError) as error:
        failures.append(f"{tag} {name}: {error}")
        log(f"{tag} FAILED: {error}")
        return None
    line, problems = verdict(figures)
    if line:
        log(f"{tag} {line}")
    failures.extend(problems)
    return figures


def warm_verdict(warm: dict) -> tuple:
    line = (f"{warm['outcome']} in {warm['seconds']:.1f} s: RSS before {mib(warm['before'])}, steady "
            f"{mib(warm['steady'])}, peak {mib(warm['peak_sample'])} (VmHWM {mib(warm['hwm'])}), 5 s after {mib(warm['after'])}")
    ok = warm["outcome"] == "done" and warm["rc"] == 0
    return line, [] if ok else [f"(a) warm: list {warm['outcome']}, exit status {warm['rc']}"]


def claim_verdict(claim: dict) -> tuple:
    line = (f"claimed in {claim['seconds']:.1f} s: RSS {mib(claim['before'])} → VmHWM {mib(claim['hwm'])} "
            f"(growth {mib(claim['growth'])}); 3 s later {mib(claim['later'])}; stop {claim['stop_s'] * 1000:.0f} ms")
    return line, [] if claim["rc"] == 0 else [f"(b) claim: exit status {claim['rc']} after SIGTERM"]


def pressure_verdict(pressure: dict) -> tuple:
    return None, [f"(c) run {i}: exit status {r['rc']}, tier entries after {r['after_entries']}"
                  for i, r in enumerate(pressure["runs"], 1) if r["rc"] != 0 or r["after_entries"] != 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imgd", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--base-list", required=True, help="the small set's URL list (gen_corpus.py lists)")
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--claim-lines", type=int, default=1_000_000)
    parser.add_argument("--pressure-runs", type=int, default=5)
    parser.add_argument("--memory-limit", default="64MiB")
    parser.add_argument("--cap", type=int, default=16)
    parser.add_argument("--parts", default="warm,claim,pressure")
    parser.add_argument("--results")
    parser.add_argument("--fs", default="")
    parser.add_argument("--command", default="bench/memory-bench.sh")
    args = parser.parse_args()
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    parts = args.parts.split(",")
    warm = claim = pressure = None
    failures = []
    if "warm" in parts:
        log(f"(a) warming {args.urls} URLs, memory limit {args.memory_limit}, cap {args.cap}")
        warm = run_part("(a)", "warm", failures, lambda: part_warm(args, args.work), warm_verdict)
    if "claim" in parts:
        log(f"(b) claiming a {args.claim_lines}-line list")
        claim = run_part("(b)", "claim", failures, lambda: part_claim(args, args.work), claim_verdict)
    if "pressure" in parts:
        log(f"(c) memory pressure, {args.pressure_runs} runs")
        pressure = run_part("(c)", "pressure", failures, lambda: part_pressure(args, args.work), pressure_verdict)
    text = section(args, args.fs, warm, claim, pressure, failures)
    results_md.publish(text, args.results, "memory-bench", "bench/memory-bench.sh", log)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
