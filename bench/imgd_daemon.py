#!/usr/bin/env python3
"""Running the imgd daemon from the benchmarks (Python 3 stdlib only).

A library for ready_bench.py and memory_bench.py, and a command line for prefetch-bench.sh's
daemon path:

  imgd_daemon.py wait-socket --socket SOCK --pid PID [--timeout S]
      Waits until the daemon at SOCK answers {"cmd":"ping"} (retrying every 5 ms), or fails
      when PID exits first or the timeout passes. Prints the seconds it took.

  imgd_daemon.py drop --spool DIR --list FILE --name NAME --pid PID [--timeout S] [--poll-ms 5]
      The timed part of the daemon path: starts the clock, copies FILE to DIR/.NAME.tmp and
      renames it to DIR/NAME, then polls (a stat every --poll-ms) until NAME appears in
      DIR/done/ or DIR/failed/. Right then it reads the daemon's CPU time (utime + stime of
      /proc/PID/stat, its whole life so far) and peak RSS (VmHWM of /proc/PID/status). Prints
      one line: "wall_s user_s sys_s hwm_kib done|failed|timeout".

Measurement overhead: one stat(2) every 5 ms from this process (~200 a second), nothing in
the daemon. The wall time's resolution is the poll interval.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- /proc ---------------------------------------------------------------------------------

def proc_status(pid: int) -> dict:
    """The kB fields of /proc/PID/status (VmRSS, VmHWM, …) as KiB integers."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[key] = int(parts[0])
    return out


def rss_kib(pid: int) -> int:
    """VmRSS in KiB, read with one small read (cheap enough for a 100 ms sampler)."""
    return proc_status(pid)["VmRSS"]


def cpu_seconds(pid: int) -> tuple:
    """(user, system) CPU seconds of PID so far, all its threads, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text[text.rindex(")") + 2:].split()   # after "pid (comm) ": state is field 3
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        return text[text.rindex(")") + 2] != "Z"
    except FileNotFoundError:
        return False


# --- The control socket --------------------------------------------------------------------

class Control:
    """One connection to the control socket: JSON lines, replies in request order."""

    def __init__(self, path: str, timeout: float = 30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = b""
        self.events = []
        self.next_id = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, cmd: str, **args) -> int:
        self.next_id += 1
        args.update(id=self.next_id, cmd=cmd)
        self.sock.sendall(json.dumps(args).encode() + b"\n")
        return self.next_id

    def read_message(self) -> dict:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the daemon closed the control connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def reply(self) -> dict:
        """The next reply; event lines met on the way are kept in self.events."""
        while True:
            message = self.read_message()
            if "event" in message:
                self.events.append(message)
                continue
            return message

    def request(self, cmd: str, **args) -> dict:
        self.send(cmd, **args)
        message = self.reply()
        if not message.get("ok"):
            raise RuntimeError(f"{cmd}: {message.get('error')}")
        return message["result"]

    def event(self, name: str) -> dict:
        """Waits for the next event called name (kept ones first)."""
        for i, message in enumerate(self.events):
            if message["event"] == name:
                return self.events.pop(i)
        while True:
            message = self.read_message()
            if message.get("event") == name:
                return message
            if "event" in message:
                self.events.append(message)


def wait_socket(path: str, pid: int, timeout: float) -> float:
    """Seconds until the daemon answers a ping at path; raises if pid exits or time runs out."""
    start = time.monotonic()
    while True:
        try:
            control = Control(path, timeout=2)
            try:
                control.request("ping")
                return time.monotonic() - start
            finally:
                control.close()
        except (OSError, ConnectionError, ValueError):
            pass
        if pid and not alive(pid):
            raise RuntimeError(f"imgd (pid {pid}) exited before its socket answered")
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"imgd's socket {path} did not answer within {timeout:.0f} s")
        time.sleep(0.005)


# --- Starting and stopping -----------------------------------------------------------------

class Daemon:
    """An imgd daemon started for a measurement, stopped with SIGTERM (or SIGKILL after 10 s)."""

    def __init__(self, binary: str, root: str, extra_args=(), env=None, log_path=None,
                 socket_path=None):
        """root holds spool/, cache/, state/, imgd.sock and imgd.log unless told otherwise."""
        self.root = root
        self.spool = os.path.join(root, "spool")
        self.cache = os.path.join(root, "cache")
        self.state = os.path.join(root, "state")
        self.socket = socket_path or os.path.join(root, "imgd.sock")
        self.args = [binary, "--spool", self.spool, "--cache", self.cache, "--state", self.state,
                     "--socket", self.socket, *extra_args]
        # Our environment without systemd's variables, plus what the caller adds (env).
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("NOTIFY_SOCKET", "MEMORY_PRESSURE_WATCH", "MEMORY_PRESSURE_WRITE",
                                 "LISTEN_FDS", "LISTEN_PID", "WATCHDOG_USEC", "JOURNAL_STREAM")}
        self.env.update(env or {})
        self.log_path = log_path or os.path.join(root, "imgd.log")
        self.process = None
        self.started_at = None

    def start(self, wait: bool = True, timeout: float = 60) -> "Daemon":
        os.makedirs(self.root, exist_ok=True)
        self.log = open(self.log_path, "ab")
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(self.args, env=self.env, stdin=subprocess.DEVNULL,
                                        stdout=self.log, stderr=self.log)
        # The calling shell script's exit trap stops a daemon left behind by this pid file.
        if os.environ.get("IMGD_BENCH_PIDFILE"):
            with open(os.environ["IMGD_BENCH_PIDFILE"], "w") as f:
                f.write(f"{self.process.pid}\n")
        if wait:
            wait_socket(self.socket, self.process.pid, timeout)
        return self

    @property
    def pid(self) -> int:
        return self.process.pid

    def control(self) -> Control:
        return Control(self.socket)

    def stop(self, timeout: float = 10) -> int:
        """SIGTERM, then waits; returns the exit status (SIGKILL and -9 after the timeout)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        status = self.process.returncode
        self.process = None
        return status

    def timed_stop(self, timeout: float = 10) -> tuple:
        """stop(), timed: (exit status, seconds from SIGTERM until the daemon was gone)."""
        start = time.monotonic()
        status = self.stop(timeout)
        return status, time.monotonic() - start

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def drop_list(spool: str, source: str, name: str) -> None:
    """Writes source into the spool as .NAME.tmp and renames it to NAME (the daemon's rule)."""
    tmp = os.path.join(spool, f".{name}.tmp")
    shutil.copyfile(source, tmp)
    os.rename(tmp, os.path.join(spool, name))


def wait_landed(spool: str, name: str, timeout: float, poll: float, pid: int = 0) -> str:
    """Polls until NAME is in spool/done/ or spool/failed/; returns "done", "failed" or "timeout"."""
    done = os.path.join(spool, "done", name)
    failed = os.path.join(spool, "failed", name)
    deadline = time.monotonic() + timeout
    checks = 0
    while time.monotonic() < deadline:
        if os.path.exists(done):
            return "done"
        if os.path.exists(failed):
            return "failed"
        checks += 1
        if pid and checks % 200 == 0 and not alive(pid):
            return "exited"
        time.sleep(poll)
    return "timeout"


# --- Command line (prefetch-bench.sh) ------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("wait-socket")
    w.add_argument("--socket", required=True)
    w.add_argument("--pid", type=int, required=True)
    w.add_argument("--timeout", type=float, default=60)
    d = sub.add_parser("drop")
    d.add_argument("--spool", required=True)
    d.add_argument("--list", required=True)
    d.add_argument("--name", required=True)
    d.add_argument("--pid", type=int, required=True)
    d.add_argument("--timeout", type=float, default=1800)
    d.add_argument("--poll-ms", type=float, default=5)
    args = parser.parse_args()
    if args.command == "wait-socket":
        try:
            print(f"{wait_socket(args.socket, args.pid, args.timeout):.3f}")
        except RuntimeError as error:
            print(f"imgd_daemon.py: {error}", file=sys.stderr)
            sys.exit(1)
        return
    start = time.monotonic()
    drop_list(args.spool, args.list, args.name)
    outcome = wait_landed(args.spool, args.name, args.timeout, args.poll_ms / 1000, args.pid)
    wall = time.monotonic() - start
    try:
        user, system = cpu_seconds(args.pid)
        hwm = proc_status(args.pid).get("VmHWM", 0)
    except (FileNotFoundError, ProcessLookupError):
        user = system = 0.0
        hwm = 0
        outcome = "exited"
    print(f"{wall:.3f} {user:.2f} {system:.2f} {hwm} {outcome}")
    sys.exit(0 if outcome == "done" else 1)


if __name__ == "__main__":
    main()
