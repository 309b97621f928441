#!/usr/bin/env python3
"""bench/compare.sh's report: new ÷ REF for every figure, pair by pair (Python 3 stdlib only).

  compare_report.py --meta meta.txt [--prefetch runs.tsv] [--lookup runs.tsv]
                    [--startup runs.tsv] [--results bench/RESULTS.md]

Inputs, each optional (a part that did not run is left out):
  --prefetch  prefetch-bench.sh's per-run records (--runs-file) of a run with IMGD_REF set:
              tools imgd / imgd-ref (`imgd prefetch`) and imgd-daemon / imgd-daemon-ref.
  --lookup    lookup-bench.sh's per-run records (--runs-file) with IMGD_REF set: systems imgd
              and imgd-ref, one JSON line per run.
  --startup   startup_ab.py's lines: figure round side wall_ms cpu_ms rss_mib.
meta.txt holds key=value lines (date, args, ref, ref_desc, new_desc, machine, parts, load_before,
load_after).

A pair is the new build's run and REF's run of the same round (they ran back to back). For each
figure: both sides' medians, the ratio new ÷ REF of every pair, and the pairs' median and
min–max. "reading" says which way the pairs point: `slower`/`faster` (or `more`/`less` for
memory, `fewer`/`more` for requests/s) only when every pair points that way and the median
ratio is beyond ±5%, and at least three pairs ran; otherwise `≈` (within the noise of this machine). Prints the section and,
with --results, writes it between the `compare` markers of that file.
"""
import argparse
import csv
import json
import statistics

from results_md import load_meta, replace_section

SCRIPT = "bench/compare.sh"
THRESHOLD = 0.05
# Two pairs agree by chance too often on this noisy machine (an A/A run of one binary against
# itself showed it): a direction is named from three pairs on.
MIN_PAIRS = 3


class Figure:
    """One measured quantity: per round, the new and REF values; lower_better says which way is good."""

    def __init__(self, group: str, name: str, unit: str, lower_better: bool = True, digits: int = 2):
        self.group, self.name, self.unit, self.lower_better, self.digits = group, name, unit, lower_better, digits
        self.new, self.ref = {}, {}
        self.failed = 0

    def add(self, side: str, round_no: int, value) -> None:
        if value is None:
            self.failed += 1
        else:
            (self.new if side == "new" else self.ref)[round_no] = value

    def pairs(self) -> list:
        return [self.new[n] / self.ref[n] for n in sorted(self.new) if n in self.ref and self.ref[n] > 0]

    def reading(self, pairs: list) -> str:
        if not pairs:
            return "—"
        if len(pairs) < MIN_PAIRS:
            return f"≈ ({len(pairs)} pair{'s' if len(pairs) > 1 else ''}: too few to read)"
        median = statistics.median(pairs)
        worse_word, better_word = ("slower", "faster")
        if self.unit == "MiB":
            worse_word, better_word = ("more", "less")
        elif not self.lower_better:
            worse_word, better_word = ("fewer", "more")
        above = all(p > 1 for p in pairs) and median > 1 + THRESHOLD
        below = all(p < 1 for p in pairs) and median < 1 - THRESHOLD
        worse, better = (above, below) if self.lower_better else (below, above)
        if worse:
            return f"**{worse_word}**"
        if better:
            return better_word
        return "≈"

    def row(self) -> str:
        pairs = self.pairs()
        fmt = f".{self.digits}f"
        new = format(statistics.median(self.new.values()), fmt) if self.new else "—"
        ref = format(statistics.median(self.ref.values()), fmt) if self.ref else "—"
        if pairs:
            summary = f"**{statistics.median(pairs):.2f}** ({min(pairs):.2f}–{max(pairs):.2f})"
            each = " ".join(f"{p:.2f}" for p in pairs)
        else:
            summary, each = "—", "—"
        better = "lower" if self.lower_better else "higher"
        failed = f" ({self.failed} failed)" if self.failed else ""
        return (f"| {self.group} | {self.name} | {self.unit}, {better} is better | {ref} | {new} | {summary} "
                f"| {each} | {self.reading(pairs)}{failed} |")


def scheme_label(scheme: str) -> str:
    return "https + h2" if scheme == "https" else "http"


def prefetch_figures(path: str) -> list:
    with open(path, newline="") as f:
        runs = list(csv.DictReader(f, delimiter="\t"))
    figures = {}
    order = []
    for r in runs:
        tool = r["tool"]
        base = tool[:-4] if tool.endswith("-ref") else tool
        if base not in ("imgd", "imgd-daemon"):
            continue
        side = "ref" if tool.endswith("-ref") else "new"
        path_name = "`imgd prefetch`" if base == "imgd" else "daemon path"
        group = f"{r['set']} ({r['files']} files, {int(r['bytes']) / 1e6:.0f} MB), {scheme_label(r['scheme'])}"
        if len({x['cap'] for x in runs}) > 1:
            group += f", cap {r['cap']}"
        ok = r["status"] == "ok"
        for measure, unit, value in (
                ("wall", "s", float(r["wall_s"]) if ok else None),
                ("CPU (user+sys)", "s", float(r["user_s"]) + float(r["sys_s"]) if ok else None),
                ("peak RSS", "MiB", int(r["maxrss_kib"]) / 1024 if ok else None)):
            key = (group, path_name, measure)
            if key not in figures:
                figures[key] = Figure(group, f"{path_name} {measure}", unit, digits=1 if unit == "MiB" else 2)
                order.append(key)
            figures[key].add(side, int(r["run"]), value)
    return [figures[k] for k in order]


def lookup_figures(path: str) -> list:
    figures = {}
    order = []
    with open(path) as f:
        for line in f:
            system, clients, depth, run, payload = line.rstrip("\n").split("\t", 4)
            if system not in ("imgd", "imgd-ref"):
                continue
            record = json.loads(payload)
            side = "ref" if system == "imgd-ref" else "new"
            mode = "not pipelined" if depth == "1" else f"depth {depth}"
            group = f"lookups (`get` hits), {clients} clients, {mode}"
            valid = record.get("valid")
            cpu_us = (record["server_cpu_s"] * 1e6 / record["requests"]
                      if valid and record.get("requests") and "server_cpu_s" in record else None)
            for measure, unit, lower, digits, value in (
                    ("requests/s", "req/s", False, 0, record.get("requests_per_s") if valid else None),
                    ("p99 latency", "ms", True, 3, record.get("p99_ms") if valid else None),
                    ("server CPU per request", "µs", True, 1, cpu_us)):
                key = (group, measure)
                if key not in figures:
                    figures[key] = Figure(group, measure, unit, lower_better=lower, digits=digits)
                    order.append(key)
                figures[key].add(side, int(run), value)
    return [figures[k] for k in order]


def startup_figures(path: str) -> list:
    figures = {}
    order = []
    with open(path) as f:
        for line in f:
            name, round_no, side, wall, cpu, rss = line.rstrip("\n").split("\t")
            group = f"start: {name}"
            for measure, unit, digits, value in (("wall", "ms", 1, wall), ("CPU (user+sys)", "ms", 1, cpu),
                                                 ("peak RSS", "MiB", 1, rss)):
                key = (group, measure)
                if key not in figures:
                    figures[key] = Figure(group, measure, unit, digits=digits)
                    order.append(key)
                figures[key].add(side, int(round_no), float(value))
    return [figures[k] for k in order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--meta", required=True)
    parser.add_argument("--prefetch")
    parser.add_argument("--lookup")
    parser.add_argument("--startup")
    parser.add_argument("--results")
    args = parser.parse_args()
    meta = load_meta(args.meta)
    figures = []
    if args.prefetch:
        figures += prefetch_figures(args.prefetch)
    if args.lookup:
        figures += lookup_figures(args.lookup)
    if args.startup:
        figures += startup_figures(args.startup)
    rows = [f.row() for f in figures]
    slower = [f"{f.group}: {f.name}" for f in figures if f.reading(f.pairs()).startswith("**")]
    body = f"""## Compare: the working tree against {meta.get('ref', '?')}, interleaved A/B

Run {meta.get('date', '?')} with `bench/compare.sh {meta.get('args', '')}`; {meta.get('machine', '')}.
REF (A): {meta.get('ref_desc', '?')}. New (B): {meta.get('new_desc', '?')}.
{meta.get('parts', '')}
1-minute load average {meta.get('load_before', '?')} before, {meta.get('load_after', '?')} after (the machine is shared).

Every figure ran as pairs: the new build and REF back to back in the same round (new first in odd
rounds, REF first in even ones). **new ÷ REF** is taken pair by pair; below 1 the new build is
lower (faster, or less memory), except requests/s, where above 1 is better. "reading" names a
direction only when every pair (at least {MIN_PAIRS}) agrees and the median is beyond ±{THRESHOLD:.0%}; `≈` is within noise.

| work | figure | unit | REF median | new median | new ÷ REF median (min–max) | per pair | reading |
|---|---|---|---|---|---|---|---|
""" + "\n".join(rows) + "\n\n" + (
        "Worse in every pair: " + "; ".join(slower) + "." if slower
        else "No figure is worse in every pair by more than 5%.")
    print(body)
    if args.results:
        replace_section(args.results, "compare", SCRIPT, body)


if __name__ == "__main__":
    main()
