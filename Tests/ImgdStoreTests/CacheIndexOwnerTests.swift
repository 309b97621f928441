import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdStore

/// Who each entry is charged to (quotas per user): the owner column, its per-owner totals kept
/// by triggers, its migration into an index made before it, and eviction of one owner's entries.
@Suite("Cache index: owners, their totals, their migration and their eviction", .offThePool)
struct CacheIndexOwnerTests {
    private func entry(_ name: String, bytes: Int = 100, owner: UInt32?, lastAccess: Int = 1_000, pinnedUntil: Int? = nil) throws -> IndexEntry {
        let url = try ImageURL("http://example.com/\(name).png")
        return IndexEntry(
            key: url.cacheKey, url: url.normalized, bytes: bytes, sha256: SHA256Digest(of: Array(repeating: 1, count: 100)),
            format: .png, width: 8, height: 6, etag: nil, lastModified: nil, contentType: "image/png",
            fetchedAt: 1_000, lastAccess: lastAccess, pinnedUntil: pinnedUntil, owner: owner)
    }

    @Test("owners round-trip; totals per owner follow inserts, replacements (the owner kept) and removals; unowned rows are in none")
    func totalsFollowRows() throws {
        let folder = try ScratchFolder("imgd-owner")
        defer { folder.remove() }
        let index = try CacheIndex(path: folder.path + "/index.sqlite")
        let a = try entry("a", bytes: 100, owner: 1000), b = try entry("b", bytes: 50, owner: 1000)
        let c = try entry("c", bytes: 70, owner: 2000, pinnedUntil: 10_000), d = try entry("d", bytes: 9, owner: nil)
        try index.insert([a, b, c, d])
        #expect(try index.entry(for: a.key)?.owner == 1000)
        #expect(try index.entry(for: d.key)?.owner == nil)
        #expect(try index.ownerUsage(now: 5_000) == [
            OwnerUsage(owner: 1000, entries: 2, bytes: 150), OwnerUsage(owner: 2000, entries: 1, bytes: 70, pinnedBytes: 70),
        ])
        // Replaced by another uid's fetch (a refresh with a new body): the row stays charged to 1000.
        var replaced = try entry("a", bytes: 400, owner: 2000)
        try index.insert([replaced])
        replaced.owner = 1000
        #expect(try index.entry(for: a.key)?.owner == 1000)
        #expect(try index.usage(of: 1000, now: 5_000) == OwnerUsage(owner: 1000, entries: 2, bytes: 450))
        #expect(try index.usage(of: 2000, now: 20_000) == OwnerUsage(owner: 2000, entries: 1, bytes: 70), "a lapsed pin still pinned")
        try index.remove([a.key, b.key, d.key])
        #expect(try index.ownerUsage(now: 5_000) == [OwnerUsage(owner: 2000, entries: 1, bytes: 70, pinnedBytes: 70)])
        try index.close()
    }

    @Test("an index made before owners (the freshness schema) opens with its rows unowned; new rows are charged; opened again, nothing is lost")
    func migratesIndexWithoutOwners() async throws {
        let folder = try ScratchFolder("imgd-owner")
        defer { folder.remove() }
        let path = folder.path + "/index.sqlite"
        let old = try entry("old", owner: nil)
        let made = try await ChildProcess.run("/usr/bin/sqlite3", [path, """
            PRAGMA journal_mode = WAL;
            CREATE TABLE entries (
                key BLOB UNIQUE NOT NULL, url TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 BLOB NOT NULL,
                format TEXT NOT NULL, width INTEGER, height INTEGER, etag TEXT, last_modified TEXT,
                content_type TEXT, fetched_at INTEGER NOT NULL, last_access INTEGER NOT NULL,
                hit_count INTEGER NOT NULL DEFAULT 0, pinned_until INTEGER, verified_generation INTEGER NOT NULL,
                validated_at INTEGER, fresh_until INTEGER, cache_flags INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL, bytes INTEGER NOT NULL);
            INSERT INTO totals VALUES (0, 1, 100);
            INSERT INTO meta VALUES ('generation', 2), ('clean', 1);
            INSERT INTO entries VALUES (x'\(old.key.hex)', '\(old.url)', 100, x'\(old.sha256.hex)', 'png', 8, 6, NULL,
                NULL, 'image/png', 1000, 1000, 0, NULL, 2, NULL, NULL, 0);
            """])
        #expect(made.status == 0, "\(made.stderr)")

        let index = try CacheIndex(path: path)
        #expect(try index.entry(for: old.key)?.owner == nil)
        #expect(try index.ownerUsage(now: 0).isEmpty)
        let new = try entry("new", bytes: 30, owner: 1000)
        try index.insert([new])
        #expect(try index.ownerUsage(now: 0) == [OwnerUsage(owner: 1000, entries: 1, bytes: 30)])
        #expect(try index.totals() == (2, 130))
        try index.close()
        let again = try CacheIndex(path: path)
        #expect(try again.entry(for: new.key) == new)
        #expect(try again.ownerUsage(now: 0) == [OwnerUsage(owner: 1000, entries: 1, bytes: 30)])
        try again.close()
    }

    @Test("evicting for one owner's quota takes that owner's least recently used unpinned rows only, counted as reason quota")
    func evictsOneOwner() throws {
        let folder = try ScratchFolder("imgd-owner")
        defer { folder.remove() }
        let cache = try DiskCache(root: folder.path + "/cache")
        let rows = [
            try entry("o1", owner: 7, lastAccess: 1_000), try entry("o2", owner: 7, lastAccess: 2_000, pinnedUntil: .max),
            try entry("o3", owner: 7, lastAccess: 3_000), try entry("x0", owner: 8, lastAccess: 500), try entry("u0", owner: nil, lastAccess: 400),
        ]
        try cache.index.insert(rows)
        let pass = try cache.evictLeastRecentlyUsed(of: 7, toFree: 150, now: 5_000)
        #expect(pass.files == 2)
        #expect(try cache.index.entry(for: rows[0].key) == nil)
        #expect(try cache.index.entry(for: rows[2].key) == nil)
        for kept in [rows[1], rows[3], rows[4]] { #expect(try cache.index.entry(for: kept.key) != nil) }
        #expect(cache.evictions.total(.quota).files == 2)
        try cache.close()
    }
}
