#!/usr/bin/env python3
"""Writes an imgd cache index (index.sqlite) of N synthetic entries (Python 3 stdlib only).

  make_index.py --out FILE [--entries 1000000]

The schema is CacheIndex's (Sources/ImgdStore/Index/CacheIndex.swift, copied below: keep them
in step; Tests/ImgdStoreTests/BenchIndexScriptTests.swift fails when they differ), rows only —
no image files. imgd-index-bench builds the same kind of index through
the real code, but deletes its folder's contents and evicts 100,000 of the rows before it
exits, and its rows' access times are in 1970 (the daemon's age sweep would remove them all),
so the start-up benchmark makes its own:

- key = sha256 of the normalised URL `http://bench.example/i/<n>.png` (as imgd keys it);
- 4–40 KB per entry (mean ~22 KB; the total is what the daemon's --disk-limit must allow);
- fetched and last used within the last day (so no age sweep touches them), not pinned;
- validated when fetched, with no lifetime and no Cache-Control flags;
- verified in generation 1, and the index marked as closed cleanly (meta clean=1), as a
  daemon leaves it after a clean stop, with its keys checked (meta keys_version=2: every key is
  its URL's, so the daemon's one-time check of keys written by earlier versions is not made).

For speed the rows go in without the triggers, the last_access index is made after them, then
totals are set and the triggers created; the result is the file CacheIndex would have made.
"""
import argparse
import hashlib
import os
import sqlite3
import time

# CacheIndex.schema, split so the triggers come after the bulk insert.
TABLES = """
CREATE TABLE IF NOT EXISTS entries (
    key BLOB UNIQUE NOT NULL,
    url TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    sha256 BLOB NOT NULL,
    format TEXT NOT NULL,
    width INTEGER,
    height INTEGER,
    etag TEXT,
    last_modified TEXT,
    content_type TEXT,
    fetched_at INTEGER NOT NULL,
    last_access INTEGER NOT NULL,
    hit_count INTEGER NOT NULL DEFAULT 0,
    pinned_until INTEGER,
    verified_generation INTEGER NOT NULL,
    validated_at INTEGER,
    fresh_until INTEGER,
    cache_flags INTEGER NOT NULL DEFAULT 0,
    owner INTEGER
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS totals (
    id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL, bytes INTEGER NOT NULL);
"""
AFTER = """
CREATE INDEX IF NOT EXISTS entries_by_last_access ON entries(last_access);
CREATE INDEX IF NOT EXISTS entries_pinned ON entries(pinned_until) WHERE pinned_until IS NOT NULL;
INSERT OR REPLACE INTO totals SELECT 0, count(*), coalesce(sum(bytes), 0) FROM entries;
CREATE TRIGGER IF NOT EXISTS entries_counted_in AFTER INSERT ON entries BEGIN
    UPDATE totals SET entries = entries + 1, bytes = bytes + NEW.bytes WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS entries_counted_out AFTER DELETE ON entries BEGIN
    UPDATE totals SET entries = entries - 1, bytes = bytes - OLD.bytes WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS entries_recounted AFTER UPDATE OF bytes ON entries BEGIN
    UPDATE totals SET bytes = bytes - OLD.bytes + NEW.bytes WHERE id = 0; END;
CREATE INDEX IF NOT EXISTS entries_by_owner ON entries(owner, last_access) WHERE owner IS NOT NULL;
CREATE TABLE IF NOT EXISTS owner_totals (
    owner INTEGER PRIMARY KEY NOT NULL, entries INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS entries_owner_in AFTER INSERT ON entries WHEN NEW.owner IS NOT NULL BEGIN
    INSERT INTO owner_totals (owner, entries, bytes) SELECT NEW.owner, 1, NEW.bytes WHERE true
        ON CONFLICT (owner) DO UPDATE SET entries = entries + 1, bytes = bytes + excluded.bytes; END;
CREATE TRIGGER IF NOT EXISTS entries_owner_out AFTER DELETE ON entries WHEN OLD.owner IS NOT NULL BEGIN
    UPDATE owner_totals SET entries = entries - 1, bytes = bytes - OLD.bytes WHERE owner = OLD.owner;
    DELETE FROM owner_totals WHERE owner = OLD.owner AND entries <= 0; END;
CREATE TRIGGER IF NOT EXISTS entries_owner_recounted AFTER UPDATE OF bytes, owner ON entries
    WHEN OLD.owner IS NOT NULL OR NEW.owner IS NOT NULL BEGIN
    UPDATE owner_totals SET entries = entries - 1, bytes = bytes - OLD.bytes WHERE owner = OLD.owner;
    DELETE FROM owner_totals WHERE owner = OLD.owner AND entries <= 0;
    INSERT INTO owner_totals (owner, entries, bytes) SELECT NEW.owner, 1, NEW.bytes WHERE NEW.owner IS NOT NULL
        ON CONFLICT (owner) DO UPDATE SET entries = entries + 1, bytes = bytes + excluded.bytes; END;
INSERT OR REPLACE INTO meta VALUES ('generation', 1), ('clean', 1), ('keys_version', 2);
"""
DAY_MS = 86_400_000


def rows(count: int, now_ms: int):
    for n in range(count):
        url = f"http://bench.example/i/{n}.png"
        key = hashlib.sha256(url.encode()).digest()
        content = hashlib.sha256(key).digest()
        size = 4096 + (n * 7919) % 36865
        last = now_ms - (n * 86_399) % DAY_MS
        yield (key, url, size, content, "png", 64, 64, None, None, "image/png", last - 1000, last, 0, None, 1, last - 1000, None, 0, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--entries", type=int, default=1_000_000)
    args = parser.parse_args()
    for suffix in ("", "-wal", "-shm", ".tmp", ".tmp-wal", ".tmp-shm"):
        if os.path.exists(args.out + suffix):
            os.remove(args.out + suffix)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    start = time.monotonic()
    tmp = args.out + ".tmp"
    db = sqlite3.connect(tmp, isolation_level=None)
    db.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -524288;")
    db.executescript(TABLES)
    now_ms = int(time.time() * 1000)
    db.execute("BEGIN")
    db.executemany("INSERT INTO entries VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows(args.entries, now_ms))
    db.execute("COMMIT")
    db.executescript(AFTER)
    db.execute("PRAGMA journal_mode = WAL")   # as the daemon opens it; recorded in the header
    count, total = db.execute("SELECT entries, bytes FROM totals").fetchone()
    db.close()
    os.rename(tmp, args.out)
    print(f"{count} entries, {total / 2**30:.1f} GiB recorded, index {os.path.getsize(args.out) / 2**20:.0f} MiB, "
          f"made in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
