#!/usr/bin/env python3
"""Start-up of two builds, interleaved: one command line run for side A and for side B in turn,
timed from outside (Python 3 stdlib only). bench/compare.sh uses it for `imgctl --help` and
`imgd prefetch` of an empty list.

  startup_ab.py --figure NAME --rounds R --reps K --out FILE
                --new 'COMMAND …' --ref 'COMMAND …' [--warmup W]

Each round runs the two commands K times each, alternating (new ref new ref …; ref first in
even rounds), after W untimed runs of each (default 3) before the first round. A run is
started with posix_spawn (stdin, stdout and stderr on /dev/null) and reaped with wait4: wall
time is a monotonic clock read around the two calls, CPU time (user + system) the kernel's
accounting of the finished child. Peak RSS comes from one more, untimed run of each side per
round under GNU time (`/usr/bin/time -f %M`): a child spawned from this Python process would
report at least Python's own peak (Linux carries the peak of the memory it was started from
across exec), GNU time's is a few MiB. A run that exits non-zero fails the figure.

Appends one line per round and side to FILE (tab-separated, no header):
  figure round side wall_ms cpu_ms rss_mib
with side "new" or "ref" and each value the median of the round's K runs.
"""
import argparse
import os
import shlex
import statistics
import sys
import time


def run_once(argv: list) -> tuple:
    """(wall ms, cpu ms) of one run of argv; raises when it fails."""
    devnull = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)]
    start = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = (time.perf_counter_ns() - start) / 1e6
    os.close(devnull)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited with {code}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def peak_rss(argv: list, scratch: str) -> float:
    """Peak RSS in MiB of one run of argv under GNU time."""
    run_once(["/usr/bin/time", "-f", "%M", "-o", scratch, *argv])
    with open(scratch) as f:
        return int(f.read().split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--figure", required=True)
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--reps", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--new", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    commands = {"new": shlex.split(args.new), "ref": shlex.split(args.ref)}
    try:
        for _ in range(args.warmup):
            for argv in commands.values():
                run_once(argv)
        with open(args.out, "a") as out:
            for round_no in range(1, args.rounds + 1):
                order = ("new", "ref") if round_no % 2 else ("ref", "new")
                samples = {"new": [], "ref": []}
                for _ in range(args.reps):
                    for side in order:
                        samples[side].append(run_once(commands[side]))
                for side in ("new", "ref"):
                    wall, cpu = (statistics.median(s[i] for s in samples[side]) for i in range(2))
                    rss = peak_rss(commands[side], args.out + ".rss")
                    out.write(f"{args.figure}\t{round_no}\t{side}\t{wall:.3f}\t{cpu:.3f}\t{rss:.1f}\n")
                    print(f"{args.figure}: round {round_no} {side}: {wall:.1f} ms, cpu {cpu:.1f} ms, "
                          f"rss {rss:.1f} MiB", file=sys.stderr)
    except (OSError, RuntimeError, ValueError) as error:
        sys.exit(f"startup_ab.py: {args.figure}: {error}")
    finally:
        if os.path.exists(args.out + ".rss"):
            os.remove(args.out + ".rss")


if __name__ == "__main__":
    main()
