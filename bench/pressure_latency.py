#!/usr/bin/env python3
"""Memory pressure latency: from a byte written to the daemon's MEMORY_PRESSURE_WATCH FIFO to
the `memory_pressure` event on a subscribed control connection (the purge of the memory tier
happens before the event is published). Python 3 stdlib only; the daemon is the real imgd.

  pressure_latency.py --imgd PATH [--events N] [--work DIR]

Prints the median, p90, p99 and max in milliseconds over N events (default 50). The tests
assert only the order (written, purged, reported); this is where the latency is measured.
The memory tier's 30 s cool-down refuses refills, not events: writes 20 ms apart are each one
event.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imgd_daemon import Daemon  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--imgd", required=True)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--work")
    args = parser.parse_args()
    root = args.work or tempfile.mkdtemp(prefix="imgd-pressure-")
    os.makedirs(root, exist_ok=True)
    fifo = os.path.join(root, "pressure.fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo, 0o600)
    daemon = Daemon(args.imgd, root, env={"MEMORY_PRESSURE_WATCH": fifo})
    with daemon:
        daemon.start()
        control = daemon.control()
        control.request("subscribe", events=["memory_pressure"])
        writer = os.open(fifo, os.O_WRONLY)
        latencies = []
        try:
            for _ in range(args.events):
                sent = time.monotonic()
                os.write(writer, b"\x01")
                control.event("memory_pressure")
                latencies.append((time.monotonic() - sent) * 1000)
                time.sleep(0.02)
        finally:
            os.close(writer)
            control.close()
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(round(p / 100 * (len(latencies) - 1))))]

    print(f"memory_pressure events: {len(latencies)}; write to event, ms: median {statistics.median(latencies):.2f}, "
          f"p90 {pct(90):.2f}, p99 {pct(99):.2f}, max {latencies[-1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
