import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdStore

/// Entries' freshness in the index: stored with each row, renewed by a revalidation without
/// touching the rest, and added to an index made before it was kept.
@Suite("Cache index: freshness columns and their migration", .offThePool)
struct CacheIndexFreshnessTests {
    private func scratch() throws -> String {
        try ScratchFolder("imgd-fresh").path
    }

    private func entry(_ name: String, freshness: EntryFreshness? = nil) throws -> IndexEntry {
        let url = try ImageURL("http://example.com/\(name).png")
        return IndexEntry(
            key: url.cacheKey, url: url.normalized, bytes: 100, sha256: SHA256Digest(of: Array(repeating: 1, count: 100)),
            format: .png, width: 8, height: 6, etag: "\"e\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT",
            contentType: "image/png", fetchedAt: 1_000, lastAccess: 1_000, freshness: freshness)
    }

    @Test("freshness round-trips; updateFreshness renews it and the validators sent, leaving the rest; a missing row says so")
    func roundTripAndUpdate() throws {
        let folder = try scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let index = try CacheIndex(path: folder + "/index.sqlite")
        let a = try entry("a", freshness: EntryFreshness(validatedAt: 2_000, freshUntil: 62_000, noCache: true, immutable: false))
        let b = try entry("b", freshness: EntryFreshness(validatedAt: 3_000, freshUntil: nil, noCache: false, immutable: true))
        try index.insert([a, b])
        #expect(try index.entry(for: a.key) == a)
        #expect(try index.entry(for: b.key) == b)

        let renewed = EntryFreshness(validatedAt: 9_000, freshUntil: 99_000)
        #expect(try index.updateFreshness(a.key, renewed, etag: "\"v2\"", lastModified: nil))
        let updated = try #require(try index.entry(for: a.key))
        #expect(updated.freshness == renewed)
        #expect(updated.etag == "\"v2\"")
        #expect(updated.lastModified == a.lastModified, "a validator the 304 did not send is kept")
        #expect(updated.bytes == a.bytes && updated.sha256 == a.sha256 && updated.fetchedAt == a.fetchedAt)
        let gone = try entry("gone")
        #expect(try !index.updateFreshness(gone.key, renewed, etag: nil, lastModified: nil))
        try index.close()
    }

    @Test("an index made by the previous schema (no freshness columns) opens: its rows count as validated when fetched, and new rows keep theirs")
    func migratesPreviousSchema() async throws {
        let folder = try scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/index.sqlite"
        let a = try entry("a")
        // The previous schema exactly (a rowid table with the key in a unique index), one row.
        let made = try await ChildProcess.run("/usr/bin/sqlite3", [path, """
            PRAGMA journal_mode = WAL;
            CREATE TABLE entries (
                key BLOB UNIQUE NOT NULL, url TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 BLOB NOT NULL,
                format TEXT NOT NULL, width INTEGER, height INTEGER, etag TEXT, last_modified TEXT,
                content_type TEXT, fetched_at INTEGER NOT NULL, last_access INTEGER NOT NULL,
                hit_count INTEGER NOT NULL DEFAULT 0, pinned_until INTEGER, verified_generation INTEGER NOT NULL);
            CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL, bytes INTEGER NOT NULL);
            INSERT INTO totals VALUES (0, 1, 100);
            INSERT INTO meta VALUES ('generation', 2), ('clean', 1);
            INSERT INTO entries VALUES (x'\(a.key.hex)', '\(a.url)', 100, x'\(a.sha256.hex)', 'png', 8, 6, '"e"',
                'Wed, 21 Oct 2015 07:28:00 GMT', 'image/png', 1000, 1000, 0, NULL, 2);
            """])
        #expect(made.status == 0, "\(made.stderr)")

        let index = try CacheIndex(path: path)
        let old = try #require(try index.entry(for: a.key))
        #expect(old.freshness == EntryFreshness(validatedAt: 1_000))
        #expect(old.etag == "\"e\"")
        #expect(try index.totals() == (1, 100))
        let fresh = try entry("b", freshness: EntryFreshness(validatedAt: 5_000, freshUntil: 8_000, noCache: false, immutable: true))
        try index.insert([fresh])
        #expect(try index.entry(for: fresh.key) == fresh)
        #expect(try index.updateFreshness(a.key, EntryFreshness(validatedAt: 7_000, noCache: true), etag: nil, lastModified: nil))
        try index.close()

        // Opened again: nothing more to migrate, everything where it was.
        let again = try CacheIndex(path: path)
        #expect(try again.entry(for: fresh.key) == fresh)
        #expect(try again.entry(for: a.key)?.freshness == EntryFreshness(validatedAt: 7_000, noCache: true))
        try again.close()
        let columns = try await ChildProcess.run("/usr/bin/sqlite3", [path, "SELECT name FROM pragma_table_info('entries')"])
        // The owner column (quotas per user) follows the freshness columns, added by the next step.
        #expect(columns.stdout.split(separator: "\n").suffix(4) == ["validated_at", "fresh_until", "cache_flags", "owner"])
    }
}
