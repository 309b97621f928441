#!/usr/bin/env python3
"""Turns prefetch-bench.sh's raw run records into the results table (Python 3 stdlib only).

  report.py --runs runs.tsv --meta meta.txt [--results bench/RESULTS.md]
            [--section prefetch-bench|prefetch-https] [--protocols protocols.md]

runs.tsv has a header line and one line per run:
  set scheme cap tool run status wall_s user_s sys_s maxrss_kib files bytes load1 note
(status is "ok" or "FAILED"; a failed run's times are not used; scheme and load1 may be
missing in older files: http and unknown).
meta.txt holds "key=value" lines describing the machine and the settings. protocols.md is the
protocol probe's table (prefetch-bench.sh --schemes http,https).

Prints the table as Markdown and, with --results, replaces this benchmark's section of
that file (between the --section's marker comments, prefetch-bench by default), keeping
everything else.
"""
import argparse
import csv
import statistics

from results_md import load_meta, replace_section

DAEMON = "imgd-daemon"
SCRIPT = "bench/prefetch-bench.sh"
# Issue 14: over https + HTTP/2, imgd (prefetch and the daemon path) at most 0.8 × curl's time.
HTTPS_TARGET = 0.80


# Facts about the peers that explain their numbers (checked with strace on Debian 12's builds).
TOOL_NOTES = [
    "aria2c fsyncs every finished file and its .aria2 control file (about 3 fsync calls per "
    "download) on its single event-loop thread, so on a real disk its small-file time is mostly "
    "fsync latency; curl and wget2 never fsync. Compare imgd with the peer whose durability matches.",
    "All peers save each URL under its path (OUT/s/xx/sNNNNNN.png); imgd saves under "
    "sha256(URL) in its cache layout. Every run was verified byte for byte (see README).",
    "imgd-daemon is the daemon path: `imgd` started (untimed) on an empty spool, cache and state, "
    "its socket answering; timed from writing the list to spool/.NAME.tmp and renaming it into "
    "the spool until NAME appears in spool/done/ (a stat every 5 ms, so ±5 ms); its CPU is "
    "utime+stime of its whole life up to then (start-up included) from /proc/PID/stat, its peak "
    "RSS VmHWM; its report must say done with every URL cached, and it must exit 0 on SIGTERM.",
]


def load_runs(path: str) -> list:
    with open(path, newline="") as f:
        runs = list(csv.DictReader(f, delimiter="\t"))
    for r in runs:
        r["scheme"] = r.get("scheme") or "http"
        r["load1"] = r.get("load1") or ""
    return runs


def fmt(value, digits=2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def summarize(runs: list, tools_order: list) -> list:
    """One row per (set, cap, scheme, tool) in run order, with medians over the successful runs."""
    groups = {}
    for r in runs:
        groups.setdefault((r["set"], int(r["cap"]), r["scheme"], r["tool"]), []).append(r)
    keys = sorted(groups, key=lambda k: (("small", "large").index(k[0]) if k[0] in ("small", "large") else 9,
                                         k[1], ("http", "https").index(k[2]),
                                         tools_order.index(k[3]) if k[3] in tools_order else 99))
    rows = []
    for key in keys:
        all_runs = groups[key]
        ok = [r for r in all_runs if r["status"] == "ok"]
        row = {"set": key[0], "cap": key[1], "scheme": key[2], "tool": key[3], "ok": len(ok),
               "total": len(all_runs),
               "runs": {int(r["run"]): r for r in all_runs}}
        if ok:
            walls = [float(r["wall_s"]) for r in ok]
            files = int(ok[0]["files"])
            nbytes = int(ok[0]["bytes"])
            wall = statistics.median(walls)
            row.update(
                wall=wall,
                files_s=files / wall if wall > 0 else None,
                mb_s=nbytes / 1e6 / wall if wall > 0 else None,
                cpu=statistics.median(float(r["user_s"]) + float(r["sys_s"]) for r in ok),
                rss=statistics.median(int(r["maxrss_kib"]) for r in ok) / 1024,
                spread=(min(walls), max(walls)))
        rows.append(row)
    return rows


def add_ratios(rows: list) -> None:
    """imgd/peer wall-time ratios (same set, cap and scheme): of the medians, and of each
    interleaved run pair (same round)."""
    imgd = {(r["set"], r["cap"], r["scheme"]): r for r in rows if r["tool"] == "imgd"}
    for row in rows:
        base = imgd.get((row["set"], row["cap"], row["scheme"]))
        # The daemon path is imgd too: it is compared with imgd prefetch in daemon_table().
        if row["tool"] in ("imgd", DAEMON) or base is None:
            continue
        if base.get("wall") and row.get("wall"):
            row["ratio"] = base["wall"] / row["wall"]
        pairs = []
        for n in sorted(row["runs"]):
            a, b = base["runs"].get(n), row["runs"][n]
            if a and a["status"] == "ok" and b["status"] == "ok" and float(b["wall_s"]) > 0:
                pairs.append(float(a["wall_s"]) / float(b["wall_s"]))
        row["pairs"] = pairs


def schemes_of(rows: list) -> list:
    return sorted({r["scheme"] for r in rows}, key=("http", "https").index)


def scheme_label(scheme: str) -> str:
    return "https (h2)" if scheme == "https" else "http (1.1)"


def table(rows: list) -> str:
    # The scheme column only when both ran: a plain-only table reads as it always did.
    both = len(schemes_of(rows)) > 1
    head = ("| set | cap | " + ("scheme | " if both else "") + "tool | ok runs | median wall s (min–max) | files/s | MB/s "
            "| CPU s (user+sys) | peak RSS MiB | imgd/peer wall (medians) | imgd/peer per run pair |")
    lines = [head, "|" + "---|" * (12 if both else 11)]
    for r in rows:
        lead = f"| {r['set']} | {r['cap']} | " + (f"{scheme_label(r['scheme'])} | " if both else "")
        if r["ok"] == 0:
            lines.append(f"{lead}{r['tool']} | 0/{r['total']} | FAILED | | | | | | |")
            continue
        pairs = r.get("pairs")
        lines.append(
            f"{lead}{r['tool']} | {r['ok']}/{r['total']} "
            f"| {fmt(r['wall'])} ({fmt(r['spread'][0])}–{fmt(r['spread'][1])}) "
            f"| {fmt(r['files_s'], 0)} | {fmt(r['mb_s'], 1)} | {fmt(r['cpu'])} | {fmt(r['rss'], 1)} "
            f"| {fmt(r.get('ratio'))} "
            f"| {' '.join(f'{p:.2f}' for p in pairs) if pairs else '—'} |")
    return "\n".join(lines)


def pair_ratios(numerator: dict, denominator: dict) -> list:
    """numerator/denominator wall time for each round (the same run number) where both passed."""
    pairs = []
    for n in sorted(numerator["runs"]):
        a, b = numerator["runs"][n], denominator["runs"].get(n)
        if b and a["status"] == "ok" and b["status"] == "ok" and float(b["wall_s"]) > 0:
            pairs.append(float(a["wall_s"]) / float(b["wall_s"]))
    return pairs


def daemon_table(rows: list) -> str:
    """The daemon path (list dropped into a running imgd's spool) over `imgd prefetch`."""
    prefetch = {(r["set"], r["cap"], r["scheme"]): r for r in rows if r["tool"] == "imgd"}
    daemon = [r for r in rows if r["tool"] == DAEMON and (r["set"], r["cap"], r["scheme"]) in prefetch]
    if not daemon:
        return ""
    both = len(schemes_of(rows)) > 1
    lines = ["", "Daemon path over `imgd prefetch` on the same list (target: within 10%, i.e. ≤ 1.10):", "",
             "| set | cap | " + ("scheme | " if both else "") + "daemon median wall s | imgd prefetch median wall s "
             "| daemon / imgd prefetch (medians) | per run pair | target ≤ 1.10 |",
             "|" + "---|" * (8 if both else 7)]
    for d in daemon:
        p = prefetch[(d["set"], d["cap"], d["scheme"])]
        lead = f"| {d['set']} | {d['cap']} | " + (f"{scheme_label(d['scheme'])} | " if both else "")
        if not d.get("wall") or not p.get("wall"):
            lines.append(f"{lead}{fmt(d.get('wall'))} | {fmt(p.get('wall'))} | — | — | — |")
            continue
        ratio = d["wall"] / p["wall"]
        pairs = pair_ratios(d, p)
        lines.append(f"{lead}{fmt(d['wall'])} | {fmt(p['wall'])} | {ratio:.2f} "
                     f"| {' '.join(f'{x:.2f}' for x in pairs) or '—'} | {'met' if ratio <= 1.10 else 'missed'} |")
    return "\n".join(lines) + "\n"


def https_tables(rows: list) -> str:
    """With both schemes: (1) the target, imgd (prefetch and daemon path) over curl, both over
    https + HTTP/2, per set and cap; (2) what https costs each tool: its https median over its
    own http median, wall and CPU."""
    if schemes_of(rows) != ["http", "https"]:
        return ""
    by = {(r["set"], r["cap"], r["scheme"], r["tool"]): r for r in rows}
    lines = ["", f"**Over https + HTTP/2, imgd against curl** (target: imgd ≤ {HTTPS_TARGET:.2f} × curl's wall time):", "",
             "| set | cap | imgd path | imgd median wall s | curl median wall s | imgd/curl (medians) "
             f"| per run pair | target ≤ {HTTPS_TARGET:.2f} | same ratio over http (1.1) |",
             "|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["set"], r["cap"]) for r in rows},
                  key=lambda k: (("small", "large").index(k[0]) if k[0] in ("small", "large") else 9, k[1]))
    for set_name, cap in keys:
        curl = by.get((set_name, cap, "https", "curl"))
        curl_http = by.get((set_name, cap, "http", "curl"))
        for tool, label in (("imgd", "`imgd prefetch`"), (DAEMON, "daemon path")):
            mine = by.get((set_name, cap, "https", tool))
            if not mine or not curl:
                continue
            if not mine.get("wall") or not curl.get("wall"):
                lines.append(f"| {set_name} | {cap} | {label} | {fmt(mine.get('wall'))} | {fmt(curl.get('wall'))} "
                             "| — | — | — | — |")
                continue
            ratio = mine["wall"] / curl["wall"]
            pairs = pair_ratios(mine, curl)
            plain = by.get((set_name, cap, "http", tool))
            plain_ratio = (fmt(plain["wall"] / curl_http["wall"]) if plain and curl_http
                           and plain.get("wall") and curl_http.get("wall") else "—")
            lines.append(f"| {set_name} | {cap} | {label} | {fmt(mine['wall'])} | {fmt(curl['wall'])} "
                         f"| **{ratio:.2f}** | {' '.join(f'{x:.2f}' for x in pairs) or '—'} "
                         f"| {'met' if ratio <= HTTPS_TARGET else '**missed**'} | {plain_ratio} |")
    if len(lines) == 5:
        lines = ["", "(No imgd or no curl runs over https: no imgd/curl ratio.)"]
    lines += ["", "What https + HTTP/2 costs each tool (its https run over its own http run):", "",
              "| set | cap | tool | http wall s | https wall s | https/http wall (medians) | per run pair "
              "| http CPU s | https CPU s | https/http CPU |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["scheme"] != "https":
            continue
        plain = by.get((r["set"], r["cap"], "http", r["tool"]))
        if not plain or not plain.get("wall") or not r.get("wall"):
            continue
        pairs = pair_ratios(r, plain)
        cpu_ratio = fmt(r["cpu"] / plain["cpu"]) if plain["cpu"] else "—"
        lines.append(f"| {r['set']} | {r['cap']} | {r['tool']} | {fmt(plain['wall'])} | {fmt(r['wall'])} "
                     f"| {r['wall'] / plain['wall']:.2f} | {' '.join(f'{x:.2f}' for x in pairs) or '—'} "
                     f"| {fmt(plain['cpu'])} | {fmt(r['cpu'])} | {cpu_ratio} |")
    return "\n".join(lines) + "\n"


def failures(runs: list) -> str:
    bad = [r for r in runs if r["status"] != "ok"]
    if not bad:
        return ""
    out = ["", "Failed runs (not timed):", ""]
    for r in bad:
        out.append(f"- {r['set']} {r['scheme']} cap {r['cap']} {r['tool']} run {r['run']}: {r['note']}")
    return "\n".join(out)


def raw_runs(runs: list) -> str:
    out = ["<details><summary>Every run, in the order run</summary>", "",
           "| # | set | scheme | cap | tool | run | status | wall s | user s | sys s | peak RSS KiB | load (1 min) before |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        out.append(f"| {i} | {r['set']} | {r['scheme']} | {r['cap']} | {r['tool']} | {r['run']} | {r['status']} "
                   f"| {r['wall_s']} | {r['user_s']} | {r['sys_s']} | {r['maxrss_kib']} | {r['load1'] or '—'} |")
    out += ["", "</details>"]
    return "\n".join(out)


def tools_line(meta: dict) -> str:
    """The versions of the tools that ran (all four when meta does not say which ran)."""
    ran = meta.get("tools", "imgd imgd-daemon curl aria2c wget2").split()
    parts = []
    if "imgd" in ran or DAEMON in ran or not {"curl", "aria2c", "wget2"} & set(ran):
        paths = [p for p, t in (("`imgd prefetch`", "imgd"), ("the daemon", DAEMON)) if t in ran]
        parts.append(f"imgd {meta.get('imgd')}" + (f" ({' and '.join(paths)})" if paths else ""))
    for tool in ("curl", "aria2c", "wget2"):
        if tool in ran:
            parts.append(f"{tool} {meta.get(tool)}")
    floors = [t for t in ran if t.startswith("floor")]
    if floors:
        parts.append(f"{', '.join(floors)}: bench/floor/libcurl_floor.c against the same libcurl "
                     "(floor saves like curl; -digest adds SHA-256 of every byte and a rename; "
                     "-2t hashes and writes on a second thread)")
    return "- Tools: " + "; ".join(parts)


def section(meta: dict, runs: list, rows: list, protocols: str = "") -> str:
    m = meta.get
    https = "https" in m("schemes", "http").split(",")
    title = ("## Prefetch over HTTPS + HTTP/2 beside plain HTTP: imgd vs curl, wget2" if https
             else "## Prefetch benchmark: imgd vs curl, aria2c, wget2")
    if any(t.startswith("floor") for t in m("tools", "").split()):
        title = ("## Floors: a bare libcurl multi loop (bench/floor/libcurl_floor.c) beside imgd and curl"
                 + (", http and https + HTTP/2" if https else ""))
    server = (f"- Server: nginx {m('nginx')} on 127.0.0.1 (worker_processes 2, sendfile, keep-alive), "
              "corpus in the page cache")
    if https:
        server += ("; http on one port, and https with `listen … ssl http2` on another (TLS 1.2/1.3, "
                   "ECDSA P-256 certificate from a throwaway CA that every tool is told to trust, "
                   "SAN IP:127.0.0.1 and DNS:localhost; http2_max_concurrent_streams 128, nginx's default)")
    loads = [float(r["load1"]) for r in runs if r.get("load1")]
    load_line = (f"- Load (other work may share the machine): 1-minute load average "
                 f"{m('load_before', '?')} (1/5/15 min) before the runs, {m('load_after', '?')} after"
                 + (f"; before each run: median {statistics.median(loads):.2f}, "
                    f"{min(loads):.2f}–{max(loads):.2f} (every run's in the last table)" if loads else ""))
    header = [
        title,
        "",
        f"Run {m('date')} with `bench/prefetch-bench.sh {m('args', '')}`".rstrip() + ".",
        "",
        f"- Machine: Linux {m('kernel')}, {m('cpu')}, {m('cores')} cores, {m('mem')} RAM",
        f"- Work area (where downloads were written): {m('fs')}",
        f"- Corpus: N={m('small')} small PNGs ({m('small_mb')} MB), M={m('large')} large PNGs "
        f"({m('large_mb')} MB); R={m('runs')} interleaved runs per tool; caps {m('caps')}",
        server,
        load_line,
        tools_line(meta),
        "",
        "Wall time is the whole run (start to exit), cold output folder every run. "
        "files/s and MB/s (10^6 bytes) use the median wall time; CPU and RSS are the tool's own "
        "(nginx excluded) as medians. An imgd/peer ratio below 1 means imgd was faster. "
        "See bench/README.md for what is and is not measured.",
        "",
    ]
    if m("quick") == "1":
        header.insert(2, "**Quick (smoke) run: too few files and runs for conclusions.**\n")
    notes = [n for n in m("notes", "").split(" | ") if n]
    notes += TOOL_NOTES
    header += ["Notes:", ""] + [f"- {n}" for n in notes] + ["", ""]
    if protocols:
        header += ["Protocol each tool used over https, from nginx's access log (`$server_protocol`, "
                   "`$ssl_protocol`, `$connection`) on a logged twin of the https server: an untimed "
                   "run of each tool on the first small images of the list, at the first cap, before "
                   "the timed runs (the timed server logs nothing, like the plain one):", "",
                   protocols.rstrip(), "", ""]
    return ("\n".join(header) + table(rows) + "\n" + https_tables(rows) + daemon_table(rows) + failures(runs)
            + "\n\n" + raw_runs(runs) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", required=True)
    parser.add_argument("--meta", required=True)
    parser.add_argument("--results")
    parser.add_argument("--section", default="prefetch-bench")
    parser.add_argument("--protocols", help="the protocol probe's Markdown table")
    args = parser.parse_args()
    protocols = open(args.protocols).read() if args.protocols else ""
    meta = load_meta(args.meta)
    runs = load_runs(args.runs)
    rows = summarize(runs, meta.get("tools", "imgd curl aria2c wget2").split())
    add_ratios(rows)
    print(table(rows))
    print(https_tables(rows))
    print(daemon_table(rows))
    print(failures(runs))
    if protocols:
        print(protocols)
    if args.results:
        replace_section(args.results, args.section, SCRIPT, section(meta, runs, rows, protocols))
        print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
