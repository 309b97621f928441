#!/usr/bin/env python3
"""Checks one benchmark run's output folder against the corpus manifest (Python 3 stdlib only).

  verify_run.py paths --manifest M --set small|large --dir OUT
      For the peers (curl, aria2c, wget2), which save each URL at its path relative
      to OUT: every manifest file of the set must be there with the same size and
      sha256, and OUT must hold nothing else (a leftover .aria2 control file, a
      wget2 "name.1" duplicate or a curl partial file means the run was not clean).

  verify_run.py cache --manifest M --set small|large --dir OUT --list URLS
      For imgd, whose cache names a file after the sha256 of its URL (not of its
      content): the files laid out as OUT/<2 hex>/<64 hex> must be as many
      as the list's URLs, add up to the manifest's bytes, and their content sha256
      must equal the manifest's as a multiset. Other files (an index, an empty temp
      folder) are ignored but mentioned. As information only, it also counts how
      many names equal sha256(URL as written in the list).

  verify_run.py cache ... --report SPOOL/done/NAME.report.json
      The daemon path: as above, and the daemon's report for the list must say
      state "done", no failures, and cached + already_cached = the list's URLs.

Prints one line, "OK ..." or "FAIL ...", and exits 0 or 1.
"""
import argparse
import collections
import hashlib
import os
import re
import sys

PREFIX = {"small": "s/", "large": "l/"}
CACHE_NAME = re.compile(r"^([0-9a-f]{2})/([0-9a-f]{64})$")


def manifest_rows(path: str, set_name: str):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rel, size, digest = line.rstrip("\n").split("\t")
            if rel.startswith(PREFIX[set_name]):
                rows.append((rel, int(size), digest))
    return rows


def all_files(root: str):
    """Relative paths of every non-directory entry under root."""
    out = []
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return out


def sha256_file(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest() if hasattr(hashlib, "file_digest") \
            else hashlib.sha256(f.read()).hexdigest()


def fail(message: str) -> None:
    print(f"FAIL {message}")
    sys.exit(1)


def sample(items, n=3) -> str:
    items = sorted(items)
    return ", ".join(items[:n]) + (f" (+{len(items) - n} more)" if len(items) > n else "")


def verify_paths(rows, out: str) -> None:
    expected = {rel for rel, _, _ in rows}
    present = set(all_files(out))
    missing = expected - present
    extra = present - expected
    if missing:
        fail(f"{len(missing)} of {len(expected)} files missing: {sample(missing)}")
    if extra:
        fail(f"{len(extra)} unexpected files: {sample(extra)}")
    wrong = []
    total = 0
    for rel, size, digest in rows:
        path = os.path.join(out, rel)
        actual_size = os.path.getsize(path)
        total += actual_size
        if actual_size != size or sha256_file(path) != digest:
            wrong.append(f"{rel} ({actual_size} B, want {size} B)")
    if wrong:
        fail(f"{len(wrong)} files differ from the corpus: {sample(wrong)}")
    print(f"OK files={len(rows)} bytes={total}")


def check_report(path: str, urls: int) -> str:
    """The daemon's NAME.report.json: done, nothing failed, every URL cached. Returns a note."""
    import json
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as error:
        fail(f"no usable daemon report at {path}: {error}")
    settled = report.get("cached", 0) + report.get("already_cached", 0)
    if report.get("state") != "done" or report.get("failed", 0) != 0 or settled != urls:
        fail(f"daemon report: state {report.get('state')}, {report.get('cached')} cached, "
             f"{report.get('already_cached')} already cached, {report.get('failed')} failed "
             f"{report.get('failed_by_code', {})} for {urls} URLs")
    return f" report=done({report.get('cached')} cached, {report.get('duration_s')} s)"


def verify_cache(rows, out: str, list_path: str, report_path: str = None) -> None:
    with open(list_path) as f:
        urls = [line.rstrip("\n") for line in f if line.strip()]
    report_note = check_report(report_path, len(urls)) if report_path else ""
    cached, others = [], []
    for rel in all_files(out):
        m = CACHE_NAME.match(rel)
        if m and m.group(2).startswith(m.group(1)):
            cached.append(rel)
        else:
            others.append(rel)
    if len(cached) != len(urls):
        fail(f"{len(cached)} cache files for {len(urls)} URLs"
             + (f"; other files: {sample(others)}" if others else ""))
    total = sum(os.path.getsize(os.path.join(out, rel)) for rel in cached)
    want_total = sum(size for _, size, _ in rows)
    if total != want_total:
        fail(f"{total} bytes cached, corpus has {want_total}")
    got = collections.Counter(sha256_file(os.path.join(out, rel)) for rel in cached)
    want = collections.Counter(digest for _, _, digest in rows)
    if got != want:
        wrong = sum((got - want).values())
        fail(f"{wrong} cached files have content matching no corpus file")
    names = {os.path.basename(rel) for rel in cached}
    keyed = sum(1 for url in urls if hashlib.sha256(url.encode()).hexdigest() in names)
    note = f" named-by-sha256(url)={keyed}/{len(urls)}"
    if others:
        note += f" ignored-other-files={len(others)} ({sample(others, 2)})"
    print(f"OK files={len(cached)} bytes={total}{note}{report_note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("paths", "cache"))
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--set", required=True, choices=tuple(PREFIX))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--list", help="the URL list (cache mode)")
    parser.add_argument("--report", help="the daemon's NAME.report.json (cache mode, daemon path)")
    args = parser.parse_args()
    rows = manifest_rows(args.manifest, args.set)
    if not rows:
        fail(f"no {args.set} files in {args.manifest}")
    if not os.path.isdir(args.dir):
        fail(f"{args.dir} is not a folder")
    if args.mode == "paths":
        verify_paths(rows, args.dir)
    else:
        if not args.list:
            parser.error("cache mode needs --list")
        verify_cache(rows, args.dir, args.list, args.report)


if __name__ == "__main__":
    main()
