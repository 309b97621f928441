#!/usr/bin/env python3
"""The crash loop's driver (Python 3 stdlib only); bench/crash-loop.sh runs it.

  crash_loop.py corpus --dir CORPUS
      Writes the served files once (kept while CORPUS/manifest.json records this version):
      s/<xx>/sNNNNN.png   small PNGs, 1-24 KiB: under 64 KiB, imgd writes them in place
      l/<xx>/lNNNN.png    large PNGs, 66-160 KiB: over 64 KiB, spilled to tmp/ and renamed
      bad/html-N.png      an HTML page under an image's name (not an image)
      bad/cut-N.png       a PNG cut short (small and large ones): served whole, image truncated
      and, never written, missing/N.png (404).

  crash_loop.py run --imgd BIN --data DIR --corpus CORPUS --base-url URL --kills N [...]
      Writes 6 lists (10,000 URLs; text, JSON and plist; a.txt and b.txt share 600 URLs;
      d.txt only good URLs), starts imgd on DIR and kills it with SIGKILL N times, restarting
      it each time; then lets it finish every list, stops it (SIGTERM) and checks the end
      state (see --help of crash-loop.sh). Prints the figures and every violation; exit
      status 1 on any violation.

Where each kill lands is chosen at random (seeded by --seed) among: right after a list is
dropped (its claim), during start (opening, resuming, the age sweep at start), after the
k-th `fetched` event (transfers, publishing, the index's batches), right after an `evicted`
event (eviction under the small disk-limit, or the age sweep), while a list has its last few
URLs pending (its finish: report, move to done/ or failed/), and after a random delay. Before
some starts, a share of the index's rows are made two hours older (as if the daemon had been
stopped that long), so the age sweep has work when a kill comes.

Between kills it records what the daemon reported as succeeded: the URLs its state database
(what `lists` and the reports are made from) has as cached or already cached, read from a
copy taken while the daemon is dead.
"""
import argparse
import hashlib
import json
import os
import plistlib
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_corpus  # noqa: E402  (png())
import imgd_daemon  # noqa: E402  (Daemon, Control)

CORPUS_VERSION = 1
SMALL, LARGE = 8400, 600
HTML, CUT_SMALL, CUT_LARGE, MISSING = 100, 75, 75, 150
# name, URLs; a.txt and b.txt share SHARED URLs (b.txt's first ones are a.txt's); d.txt has no
# failing URL (it lands in done/), every other list has some (failed/).
LISTS = (("a.txt", 2000), ("b.txt", 2000), ("c.json", 1500), ("d.txt", 1500), ("e.plist", 1500), ("f.txt", 1500))
SHARED = 600
MODES = (("startup", 1.0), ("transfer", 3.0), ("eviction", 2.0), ("finish", 1.5), ("sweep", 1.5), ("delay", 2.0))
DAY_MS = 86_400_000


def log(message: str) -> None:
    print(f"[crash {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- The corpus ----------------------------------------------------------------------------

def small_png(index: int) -> bytes:
    rng = random.Random(0x5000000 + index)
    target = int(rng.uniform(1024, 24 * 1024))
    width = rng.choice((16, 24, 32, 48))
    return gen_corpus.png(width, max(1, target // (1 + 3 * width)), rng)


def large_png(index: int) -> bytes:
    rng = random.Random(0x6000000 + index)
    target = int(rng.uniform(66 * 1024 + 2048, 160 * 1024))
    width = rng.choice((128, 160, 200))
    return gen_corpus.png(width, max(1, target // (1 + 3 * width)), rng)


def make_corpus(corpus: str) -> dict:
    """The manifest ({"version", "good": {path: sha256}, "bad": {path: kind}}), made if needed."""
    manifest_path = os.path.join(corpus, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
        if manifest.get("version") == CORPUS_VERSION:
            return manifest
        os.unlink(manifest_path)
    log(f"writing the corpus in {corpus}")
    good, bad = {}, {}

    def put(rel: str, data: bytes) -> None:
        path = os.path.join(corpus, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    for index in range(SMALL):
        rel = f"s/{index % 256:02x}/s{index:05d}.png"
        data = small_png(index)
        assert len(data) < 64 * 1024
        put(rel, data)
        good[rel] = hashlib.sha256(data).hexdigest()
    for index in range(LARGE):
        rel = f"l/{index % 256:02x}/l{index:04d}.png"
        data = large_png(index)
        assert len(data) > 64 * 1024
        put(rel, data)
        good[rel] = hashlib.sha256(data).hexdigest()
    for index in range(HTML):
        rel = f"bad/html-{index}.png"
        put(rel, b"<!doctype html><html><body>Not found, but served as 200 (%d)</body></html>\n" % index)
        bad[rel] = "not an image"
    for index in range(CUT_SMALL + CUT_LARGE):
        data = small_png(SMALL + index) if index < CUT_SMALL else large_png(LARGE + index)
        rel = f"bad/cut-{index}.png"
        put(rel, data[: len(data) * 2 // 3])
        bad[rel] = "truncated"
    for index in range(MISSING):
        bad[f"missing/{index}.png"] = "404"
    manifest = {"version": CORPUS_VERSION, "good": good, "bad": bad}
    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f)
    os.replace(manifest_path + ".tmp", manifest_path)
    return manifest


# --- The lists -----------------------------------------------------------------------------

def plan_lists(manifest: dict, base_url: str, rng: random.Random) -> list:
    """[(name, [url, ...])]: every good and bad path once over all lists, SHARED of them twice."""
    good = sorted(manifest["good"])
    bad = sorted(manifest["bad"])
    rng.shuffle(good)
    rng.shuffle(bad)
    unique = sum(count for _, count in LISTS) - SHARED
    assert unique == len(good) + len(bad), (unique, len(good), len(bad))
    clean = dict(LISTS)["d.txt"]
    # d.txt: good paths only; the bad ones spread over the other lists with the rest.
    d_paths = good[:clean]
    rest = good[clean:] + bad
    rng.shuffle(rest)
    plans, at = [], 0
    for name, count in LISTS:
        if name == "d.txt":
            paths = d_paths
        elif name == "b.txt":
            shared = plans[0][1][:SHARED]  # a.txt's first ones
            paths = shared + rest[at: at + count - SHARED]
            at += count - SHARED
        else:
            paths = rest[at: at + count]
            at += count
        plans.append((name, paths))
    assert at == len(rest)
    base = base_url.rstrip("/")
    return [(name, [f"{base}/{p}" for p in paths]) for name, paths in plans]


def write_list(folder: str, name: str, urls: list) -> str:
    """The list file, one URL per line whatever the format (lines identify entries)."""
    path = os.path.join(folder, name)
    if name.endswith(".json"):
        text = "[\n" + ",\n".join(json.dumps(u) for u in urls) + "\n]\n"
    elif name.endswith(".plist"):
        head = ('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" '
                '"http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n<plist version="1.0">\n<array>\n')
        text = head + "".join(f"<string>{u}</string>\n" for u in urls) + "</array>\n</plist>\n"
        plistlib.loads(text.encode())  # well-formed
    else:
        text = "# crash loop\n" + "".join(u + "\n" for u in urls)
    with open(path, "w") as f:
        f.write(text)
    return path


def entry_lines(name: str, urls: list) -> dict:
    """{line: url} as the daemon numbers them (the writers above put one URL per line)."""
    first = 2 if name.endswith(".json") else (5 if name.endswith(".plist") else 2)
    return {first + i: u for i, u in enumerate(urls)}


# --- Reading the daemon's databases while it is dead ----------------------------------------

def copy_db(path: str, into: str) -> str:
    """A copy of a SQLite database and its WAL, so reading it changes nothing of the daemon's."""
    target = os.path.join(into, os.path.basename(path))
    for suffix in ("", "-wal"):
        if os.path.exists(path + suffix):
            shutil.copyfile(path + suffix, target + suffix)
    return target


def query(path: str, sql: str, args=(), table: str = None) -> list:
    """Rows of `sql` on a copy of the database; [] when `table` is given and does not exist yet
    (a kill before the daemon made its schema)."""
    with tempfile.TemporaryDirectory(prefix="crash-db-") as scratch:
        connection = sqlite3.connect(copy_db(path, scratch))
        try:
            if table and not connection.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchall():
                return []
            return connection.execute(sql, args).fetchall()
        finally:
            connection.close()


def succeeded(state_db: str) -> set:
    """(list name, line) of every URL the state database has as cached or already cached."""
    if not os.path.exists(state_db):
        return set()
    rows = query(state_db, """SELECT l.name, u.line FROM list_urls u JOIN lists l ON l.id = u.list_id
                              WHERE u.state IN (1, 2)""", table="list_urls")
    return {(name, line) for name, line in rows}


def age_entries(index_db: str, rng: random.Random) -> int:
    """Makes a random share of the rows two hours older (the daemon is dead): the age sweep at
    the next start then has work. Returns how many rows were aged."""
    if not os.path.exists(index_db):
        return 0
    connection = sqlite3.connect(index_db, timeout=10)
    try:
        share = rng.choice((2, 3, 4))
        try:
            cursor = connection.execute(
                "UPDATE entries SET last_access = last_access - 7200000 WHERE abs(random()) % ? = 0", (share,))
        except sqlite3.OperationalError:
            return 0  # no entries table yet: killed before its schema was made
        connection.commit()
        return cursor.rowcount
    finally:
        connection.close()


# --- Killing at chosen moments --------------------------------------------------------------

def subscribe(sock_path: str, events: list, timeout: float):
    """A control connection subscribed to events, or None when the socket does not answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            control = imgd_daemon.Control(sock_path, timeout=2)
            control.request("subscribe", events=events)
            return control
        except (OSError, ConnectionError, ValueError, RuntimeError):
            time.sleep(0.005)
    return None


def wait_event(control, name: str, count: int, timeout: float, reason: str = None) -> bool:
    """Reads events until `count` named `name` (with data.reason == reason, when given) came."""
    deadline = time.monotonic() + timeout
    seen = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        control.sock.settimeout(left)
        try:
            message = control.read_message()
        except (socket.timeout, OSError, ConnectionError, ValueError):
            return False
        if message.get("event") == name and (reason is None or message.get("data", {}).get("reason") == reason):
            seen += 1
            if seen >= count:
                return True


def wait_finishing(sock_path: str, timeout: float) -> bool:
    """Polls `lists` until an active list has its last few URLs pending."""
    deadline = time.monotonic() + timeout
    control = None
    while time.monotonic() < deadline:
        try:
            control = control or imgd_daemon.Control(sock_path, timeout=2)
            for item in control.request("lists")["lists"]:
                if item["state"] == "active" and 0 <= item["pending"] <= 25:
                    control.close()
                    return True
        except (OSError, ConnectionError, ValueError, RuntimeError):
            control = None
        time.sleep(0.01)
    if control:
        control.close()
    return False


class Loop:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.data = args.data
        self.spool = os.path.join(self.data, "spool")
        self.cache = os.path.join(self.data, "cache")
        self.state_db = os.path.join(self.data, "state", "imgd-state.sqlite")
        self.index_db = os.path.join(self.cache, "index.sqlite")
        self.daemon = imgd_daemon.Daemon(
            args.imgd, self.data, log_path=args.daemon_log,
            extra_args=["--disk-limit", args.disk_limit, "--max-age", "60s", "--sweep-interval", "1s"])
        self.succeeded = {}      # (name, line) -> the kill it was first seen before
        self.rows_checked = 0    # index rows whose file was hashed, after the kills and at the end
        self.modes = {}
        self.violations = []

    def violation(self, message: str) -> None:
        self.violations.append(message)
        log("VIOLATION: " + message)

    # The loop ---------------------------------------------------------------------------

    def run(self, plans: list, list_dir: str, manifest: dict) -> None:
        kills = self.args.kills
        # Lists are dropped over the loop's first three quarters, so claims and transfers are
        # still going on when most kills come; the first one at the first kill.
        span = max(1, (kills * 3) // 4)
        drops = {round(i * span / len(plans)): plan for i, plan in enumerate(plans)}
        pending = list(plans)
        for kill in range(1, kills + 1):
            plan = drops.get(kill - 1)
            if plan is None and kill == kills:
                plan = pending[0] if pending else None  # whatever was not dropped yet
            mode = "claim" if plan else self.choose_mode()
            dropped = []
            if mode == "claim":
                # Drop every list still waiting at the last kill; one otherwise.
                dropped = pending[:] if kill == kills else [plan]
            elif mode == "sweep":
                aged = age_entries(self.index_db, self.rng)
                mode = "sweep" if aged else "delay"
            started = time.monotonic()
            # A list is mostly dropped into a running daemon (its watcher claims it); sometimes
            # as the daemon starts (the start's scan of the spool claims it).
            self.daemon.start(wait=bool(dropped) and self.rng.random() < 0.7)
            for name, _ in dropped:
                imgd_daemon.drop_list(self.spool, os.path.join(list_dir, name), name)
                pending.remove(next(p for p in pending if p[0] == name))
            moment = self.wait_for(mode)
            alive = self.daemon.process.poll() is None
            self.daemon.process.kill()
            self.daemon.process.wait()
            self.daemon.log.close()
            self.daemon.process = None
            if not alive:
                self.violation(f"imgd exited by itself before kill {kill} (see {self.args.daemon_log})")
                return
            self.modes[mode] = self.modes.get(mode, 0) + 1
            for key in succeeded(self.state_db):
                self.succeeded.setdefault(key, kill)
            # Right after the kill, before a start can check or drop anything: every row names
            # a whole file, the server's.
            rows, _ = self.check_cache(manifest, self.args.base_url, f"after kill {kill}")
            log(f"kill {kill}/{kills} ({mode}{', ' + moment if moment else ''}) after "
                f"{time.monotonic() - started:.2f} s: {len(self.succeeded)} URLs reported succeeded so far, "
                f"{len(rows)} entries whole")

    def choose_mode(self) -> str:
        names = [m for m, _ in MODES]
        return self.rng.choices(names, weights=[w for _, w in MODES])[0]

    def wait_for(self, mode: str) -> str:
        """Waits for the moment `mode` names (or its timeout); returns what was seen."""
        sock = self.daemon.socket
        rng = self.rng
        if mode == "claim":
            time.sleep(rng.uniform(0, 0.4))
            return ""
        if mode == "startup":
            time.sleep(rng.uniform(0, 0.3))
            return ""
        if mode == "delay":
            time.sleep(rng.uniform(0.05, 4.0))
            return ""
        if mode == "transfer":
            control = subscribe(sock, ["fetched"], 10)
            if control is None:
                return "no socket"
            k = rng.randint(1, 300)
            got = wait_event(control, "fetched", k, 4.0)
            control.close()
            return f"after {k} fetched" if got else "no fetch in 4 s"
        if mode == "eviction":
            control = subscribe(sock, ["evicted"], 10)
            if control is None:
                return "no socket"
            got = wait_event(control, "evicted", rng.randint(1, 3), 4.0)
            control.close()
            if got:
                time.sleep(rng.uniform(0, 0.02))
            return "during eviction" if got else "no eviction in 4 s"
        if mode == "sweep":
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0, 0.6))  # the sweep at start, whether seen or not
                return "blind, at start"
            control = subscribe(sock, ["evicted"], 10)
            if control is None:
                return "no socket"
            got = wait_event(control, "evicted", 1, 3.0, reason="age")
            control.close()
            return "during the age sweep" if got else "no age eviction seen"
        if mode == "finish":
            got = wait_finishing(sock, 5.0)
            if got:
                time.sleep(rng.uniform(0, 0.05))
            return "a list finishing" if got else "no list finishing in 5 s"
        raise ValueError(mode)

    # The end ------------------------------------------------------------------------------

    def finish(self, plans: list) -> float:
        """Starts imgd once more and waits until every list is finished; stops it (SIGTERM)."""
        started = time.monotonic()
        self.daemon.start(wait=True)
        names = {name for name, _ in plans}
        deadline = started + self.args.finish_timeout
        finished = set()
        while time.monotonic() < deadline:
            finished = {n for n in names if any(
                os.path.exists(os.path.join(self.spool, sub, n + ".report.json")) for sub in ("done", "failed"))}
            try:
                control = self.daemon.control()
                active = [item for item in control.request("lists")["lists"] if not item["state"] in ("done", "failed", "cancelled")]
                control.close()
            except (OSError, ConnectionError, ValueError, RuntimeError):
                active = ["?"]
            if finished == names and not active:
                break
            if self.daemon.process.poll() is not None:
                self.violation("imgd exited by itself while finishing the lists")
                break
            time.sleep(0.2)
        else:
            self.violation(f"lists not finished {self.args.finish_timeout:.0f} s after the last restart: "
                           f"{', '.join(sorted(names - finished)) or 'a list is still claiming or active'}")
        status = self.daemon.stop(timeout=30)
        if status != 0:
            self.violation(f"the final SIGTERM stop exited with status {status}")
        return time.monotonic() - started

    def check_cache(self, manifest: dict, base_url: str, when: str) -> tuple:
        """Every index row's file is the server's file (the daemon is dead or stopped: a row
        always names a whole file, after a kill too). Returns (rows, their keys)."""
        base = base_url.rstrip("/") + "/"
        rows = query(self.index_db, "SELECT url, hex(key), hex(sha256), bytes FROM entries", table="entries") \
            if os.path.exists(self.index_db) else []
        keys = set()
        for url, key, sha, size in rows:
            key = key.lower()
            keys.add(key)
            rel = url[len(base):] if url.startswith(base) else None
            served = manifest["good"].get(rel)
            path = os.path.join(self.cache, key[:2], key)
            if served is None:
                self.violation(f"{when}: the index has {url}, which the server does not serve as an image")
                continue
            try:
                with open(path, "rb") as f:
                    content = f.read()
            except OSError as error:
                self.violation(f"{when}: {url}: its file {path} cannot be read: {error}")
                continue
            if len(content) != size or hashlib.sha256(content).hexdigest() != served or sha.lower() != served:
                self.violation(f"{when}: {url}: the cached file ({len(content)} bytes) is not the server's file")
        self.rows_checked += len(rows)
        return rows, keys

    def check(self, plans: list, manifest: dict, base_url: str) -> dict:
        base = base_url.rstrip("/") + "/"
        figures = {"cached": 0, "already_cached": 0, "failed": 0}
        failed_reported = set()
        # Lists: each once, in done/ or failed/, whole, with a report that adds up.
        for name, urls in plans:
            places = [sub for sub in ("done", "failed") if os.path.exists(os.path.join(self.spool, sub, name))]
            if len(places) != 1:
                self.violation(f"list {name} is in {places or 'neither done/ nor failed/'}")
                continue
            sub = places[0]
            with open(os.path.join(self.spool, sub, name)) as f:
                expected_text = open(os.path.join(self.args.lists_dir, name)).read()
                if f.read() != expected_text:
                    self.violation(f"{sub}/{name} differs from the list dropped")
            report_path = os.path.join(self.spool, sub, name + ".report.json")
            if not os.path.exists(report_path):
                self.violation(f"{sub}/{name} has no report")
                continue
            with open(report_path) as f:
                report = json.load(f)
            lines = entry_lines(name, urls)
            bad_lines = {line for line, u in lines.items() if u[len(base):] in manifest["bad"]}
            c, a, fl, total = report.get("cached", -1), report.get("already_cached", -1), report.get("failed", -1), report.get("total", -1)
            if total != len(urls):
                self.violation(f"{name}: report total {total}, the list has {len(urls)} URLs")
            if c + a + fl != total:
                self.violation(f"{name}: report counts do not add up: {c} cached + {a} already cached + {fl} failed != {total}")
            if sum(report.get("failed_by_code", {}).values()) != fl:
                self.violation(f"{name}: failed_by_code {report.get('failed_by_code')} does not add up to {fl}")
            failures = report.get("failures", [])
            if len(failures) + report.get("failures_truncated", 0) != fl:
                self.violation(f"{name}: {len(failures)} failures listed for {fl} failed")
            if report.get("name") != name or report.get("state") != sub:
                self.violation(f"{name}: report says name {report.get('name')!r}, state {report.get('state')!r}, in {sub}/")
            failed_lines = {item["line"] for item in failures}
            for item in failures:
                failed_reported.add((name, item["line"]))
                if lines.get(item["line"]) is None or item["url"] != lines[item["line"]]:
                    self.violation(f"{name}: failure at line {item['line']} names {item['url']!r}, "
                                   f"the list has {lines.get(item['line'])!r}")
            wrongly = sorted(failed_lines - bad_lines)
            if wrongly:
                codes = {item["line"]: item["code"] for item in failures}
                self.violation(f"{name}: {len(wrongly)} good URLs failed, e.g. line {wrongly[0]} "
                               f"{lines.get(wrongly[0])} ({codes[wrongly[0]]})")
            missed = sorted(bad_lines - failed_lines)
            if missed:
                self.violation(f"{name}: {len(missed)} failing URLs not reported failed, e.g. line {missed[0]} {lines[missed[0]]}")
            figures["cached"] += max(c, 0)
            figures["already_cached"] += max(a, 0)
            figures["failed"] += max(fl, 0)
        # No URL reported succeeded before a kill is reported failed now. (One evicted or
        # removed by the age sweep since is still a success of its list: the report counts it
        # cached; only a failure in the report, or a row back to pending or failed, is a loss.)
        lost = sorted(k for k in self.succeeded if k in failed_reported)
        if lost:
            name, line = lost[0]
            self.violation(f"{len(lost)} URLs reported succeeded before a kill are reported failed at the end, "
                           f"e.g. {name} line {line} (succeeded before kill {self.succeeded[lost[0]]})")
        undone = sorted(self.succeeded.keys() - succeeded(self.state_db))
        if undone:
            self.violation(f"{len(undone)} URLs reported succeeded before a kill are no longer cached or already "
                           f"cached in the state database, e.g. {undone[0]}")
        # The state database: nothing left claiming or active; each list once.
        rows = query(self.state_db, "SELECT name, state FROM lists")
        stuck = [(n, s) for n, s in rows if s in ("claiming", "active")]
        if stuck:
            self.violation(f"lists still {stuck[0][1]} in the state database: {stuck}")
        names = [n for n, _ in rows]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            self.violation(f"lists recorded more than once: {twice}")
        # The spool: nothing left in it, in .claimed/, or half-written beside the reports.
        left = [n for n in os.listdir(self.spool) if n not in ("done", "failed", ".claimed")]
        left += [".claimed/" + n for n in os.listdir(os.path.join(self.spool, ".claimed"))]
        for sub in ("done", "failed"):
            expected = {n for n, _ in plans} | {n + ".report.json" for n, _ in plans}
            left += [f"{sub}/{n}" for n in os.listdir(os.path.join(self.spool, sub)) if n not in expected]
        if left:
            self.violation(f"left in the spool: {left[:10]}")
        # The cache: tmp/ empty; every row's file is the server's file.
        tmp_left = os.listdir(os.path.join(self.cache, "tmp"))
        if tmp_left:
            self.violation(f"{len(tmp_left)} files left in cache/tmp/: {tmp_left[:5]}")
        rows, keys = self.check_cache(manifest, base_url, "at the end")
        figures["entries"] = len(rows)
        figures["entry_bytes"] = sum(r[3] for r in rows)
        orphans = 0
        for bucket in range(256):
            folder = os.path.join(self.cache, f"{bucket:02x}")
            orphans += sum(1 for n in os.listdir(folder) if n not in keys)
        figures["files_without_row"] = orphans
        # imgd fsck on the stopped cache.
        fsck = subprocess.run([self.args.imgd, "fsck", "--cache", self.cache], capture_output=True, text=True)
        figures["fsck"] = fsck.stdout.strip()
        if fsck.returncode != 0 or " 0 bad" not in fsck.stdout:
            self.violation(f"imgd fsck (exit {fsck.returncode}): {fsck.stdout.strip()} {fsck.stderr.strip()[:500]}")
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--dir", required=True)
    r = sub.add_parser("run")
    r.add_argument("--imgd", required=True)
    r.add_argument("--data", required=True, help="the daemon's folder (spool/, cache/, state/, imgd.sock)")
    r.add_argument("--corpus", required=True)
    r.add_argument("--base-url", required=True)
    r.add_argument("--lists-dir", required=True)
    r.add_argument("--daemon-log", required=True)
    r.add_argument("--kills", type=int, default=100)
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--disk-limit", default="16MiB")
    r.add_argument("--finish-timeout", type=float, default=600)
    args = parser.parse_args()
    if args.command == "corpus":
        make_corpus(args.dir)
        return
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    started = time.monotonic()
    manifest = make_corpus(args.corpus)
    os.makedirs(args.lists_dir, exist_ok=True)
    plans = plan_lists(manifest, args.base_url, random.Random(args.seed))
    for name, urls in plans:
        write_list(args.lists_dir, name, urls)
    for sub in ("spool", "cache", "state"):
        os.makedirs(os.path.join(args.data, sub), exist_ok=True)
    loop = Loop(args)
    log(f"seed {args.seed}: {len(plans)} lists, {sum(len(u) for _, u in plans)} URLs, {args.kills} kills, "
        f"disk-limit {args.disk_limit}")
    loop.run(plans, args.lists_dir, manifest)
    finish_s = 0.0
    figures = {}
    if not loop.violations:
        finish_s = loop.finish(plans)
        figures = loop.check(plans, manifest, args.base_url)
    seconds = time.monotonic() - started
    modes = ", ".join(f"{m} {n}" for m, n in sorted(loop.modes.items()))
    print(f"crash-loop: seed {args.seed}")
    print(f"crash-loop: {sum(loop.modes.values())} kills ({modes})")
    print(f"crash-loop: {len(plans)} lists, {sum(len(u) for _, u in plans)} URLs: "
          f"{figures.get('cached', 0)} cached, {figures.get('already_cached', 0)} already cached, "
          f"{figures.get('failed', 0)} failed; {len(loop.succeeded)} reported succeeded before a kill")
    print(f"crash-loop: {figures.get('entries', 0)} entries ({figures.get('entry_bytes', 0) / 1048576:.1f} MiB) "
          f"under disk-limit {args.disk_limit} at the end; {loop.rows_checked} entries hashed after the kills and "
          f"at the end; {figures.get('files_without_row', 0)} files without a row; "
          f"fsck: {figures.get('fsck', '-')}")
    print(f"crash-loop: {seconds:.1f} s ({finish_s:.1f} s of it the last run, finishing the lists)")
    if loop.violations:
        print(f"crash-loop: FAILED, {len(loop.violations)} violation(s):")
        for v in loop.violations:
            print(f"  - {v}")
        sys.exit(1)
    print("crash-loop: OK, no violation")


if __name__ == "__main__":
    main()
