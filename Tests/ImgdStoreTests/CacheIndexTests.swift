import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdStore

@Suite("Cache index and disk tier", .offThePool)
struct CacheIndexTests {
    private func scratch() throws -> String {
        // A folder not made yet (opening the cache makes it), in a scratch folder.
        try ScratchFolder("imgd-index").path("cache")
    }

    private func entry(_ name: String, bytes: Int = 100, content: [UInt8]? = nil) throws -> IndexEntry {
        let url = try ImageURL("http://example.com/\(name).png")
        return IndexEntry(
            key: url.cacheKey, url: url.normalized, bytes: bytes,
            sha256: SHA256Digest(of: content ?? Array(repeating: 1, count: bytes)), format: .png, width: 8, height: 6,
            etag: "\"e\"", lastModified: nil, contentType: "image/png", fetchedAt: 1_000, lastAccess: 1_000)
    }

    @Test("rows round-trip; totals follow inserts, replacements and removals without a scan")
    func roundTripAndTotals() throws {
        let folder = try scratch()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let index = try CacheIndex(path: folder + "/index.sqlite")
        let a = try entry("a", bytes: 100), b = try entry("b", bytes: 250)
        try index.insert([a, b])
        #expect(try index.entry(for: a.key) == a)
        #expect(try index.totals() == (2, 350))
        var bigger = a
        bigger.bytes = 400
        try index.insert([bigger])
        #expect(try index.totals() == (2, 650))
        try index.remove([b.key])
        #expect(try index.totals() == (1, 400))
        #expect(try index.entry(for: b.key) == nil)
        try index.close()
    }

    @Test("pinned bytes count the rows pinned now, read through an index of the pinned rows, not a scan")
    func pinnedBytesWithoutAScan() async throws {
        let folder = try scratch()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/index.sqlite"
        let index = try CacheIndex(path: path)
        let a = try entry("a", bytes: 100), b = try entry("b", bytes: 250), c = try entry("c", bytes: 400)
        try index.insert([a, b, c])
        try index.pin(a.key, until: 10_000)
        try index.pin(b.key, until: 20_000)
        #expect(try index.pinnedBytes(now: 5_000) == 350)
        #expect(try index.pinnedBytes(now: 15_000) == 250)
        #expect(try index.pinnedBytes(now: 25_000) == 0)
        try index.close()
        // The query `status` runs: SQLite's plan names the partial index (a scan of a
        // 1,000,000-row table took over half a second and held up lookups meanwhile).
        let plan = try await ChildProcess.run(
            "/usr/bin/sqlite3", [path, "EXPLAIN QUERY PLAN SELECT coalesce(sum(bytes), 0) FROM entries WHERE pinned_until > 5000"])
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.contains("USING INDEX entries_pinned"), "\(plan.stdout)")
    }

    @Test("an index from before the rowid table is rebuilt as one at open: rows, totals, pins and generation kept; new rows and lookups work")
    func migratesWithoutRowidIndex() async throws {
        let folder = try scratch()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/index.sqlite"
        // The file an imgd before the rowid table left: its schema as it was, two rows (one
        // pinned), the totals its triggers kept, a clean close at generation 3.
        let a = try entry("a", bytes: 100), b = try entry("b", bytes: 250)
        func row(_ e: IndexEntry, pinned: String) -> String {
            "(x'\(e.key.hex)', '\(e.url)', \(e.bytes), x'\(e.sha256.hex)', 'png', 8, 6, '\"e\"', NULL, 'image/png', 1000, 1000, 2, \(pinned), 3)"
        }
        let made = try await ChildProcess.run("/usr/bin/sqlite3", [path, """
            PRAGMA journal_mode = WAL;
            CREATE TABLE entries (
                key BLOB PRIMARY KEY NOT NULL, url TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 BLOB NOT NULL,
                format TEXT NOT NULL, width INTEGER, height INTEGER, etag TEXT, last_modified TEXT,
                content_type TEXT, fetched_at INTEGER NOT NULL, last_access INTEGER NOT NULL,
                hit_count INTEGER NOT NULL DEFAULT 0, pinned_until INTEGER, verified_generation INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE INDEX entries_by_last_access ON entries(last_access);
            CREATE INDEX entries_pinned ON entries(pinned_until) WHERE pinned_until IS NOT NULL;
            CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL, bytes INTEGER NOT NULL);
            INSERT INTO totals VALUES (0, 0, 0);
            CREATE TRIGGER entries_counted_in AFTER INSERT ON entries BEGIN
                UPDATE totals SET entries = entries + 1, bytes = bytes + NEW.bytes WHERE id = 0; END;
            CREATE TRIGGER entries_counted_out AFTER DELETE ON entries BEGIN
                UPDATE totals SET entries = entries - 1, bytes = bytes - OLD.bytes WHERE id = 0; END;
            CREATE TRIGGER entries_recounted AFTER UPDATE OF bytes ON entries BEGIN
                UPDATE totals SET bytes = bytes - OLD.bytes + NEW.bytes WHERE id = 0; END;
            INSERT INTO meta VALUES ('generation', 3), ('clean', 1);
            INSERT INTO entries VALUES \(row(a, pinned: "NULL")), \(row(b, pinned: "50000"));
            """])
        #expect(made.status == 0, "\(made.stderr)")

        let index = try CacheIndex(path: path)
        #expect(index.previousShutdownWasClean)
        let schema = try await ChildProcess.run("/usr/bin/sqlite3", [path, "SELECT sql FROM sqlite_master WHERE name = 'entries'"])
        #expect(schema.stdout.contains("key BLOB UNIQUE NOT NULL") && !schema.stdout.uppercased().contains("WITHOUT ROWID"), "\(schema.stdout)")
        var migratedA = try #require(try index.entry(for: a.key))
        #expect(migratedA.url == a.url && migratedA.bytes == 100 && migratedA.sha256 == a.sha256 && migratedA.hitCount == 2)
        #expect(!migratedA.needsVerification, "a row verified at generation 3 stays verified after a clean close")
        #expect(try index.entry(for: b.key)?.pinnedUntil == 50_000)
        #expect(try index.totals() == (2, 350), "the copy must not count the rows into the totals again")
        #expect(try index.pinnedBytes(now: 10_000) == 250)
        // The triggers and indexes are back: totals follow new rows, eviction finds the old ones.
        let c = try entry("c", bytes: 400)
        try index.insert([c])
        #expect(try index.totals() == (3, 750))
        #expect(try index.evictionCandidates(now: 10_000, limit: 10).map(\.key).contains(a.key))
        migratedA.bytes = 120
        try index.insert([migratedA])
        #expect(try index.totals() == (3, 770))
        try index.close()

        // Opened again, nothing more to do: the rows are where they were.
        let again = try CacheIndex(path: path)
        #expect(try again.totals() == (3, 770))
        #expect(try again.entry(for: c.key) == c)
        try again.close()
    }

    @Test("access times are batched: nothing is written until a flush, then one row per key")
    func batchedAccess() throws {
        let folder = try scratch()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let index = try CacheIndex(path: folder + "/index.sqlite")
        let a = try entry("a")
        try index.insert([a])
        index.recordAccess(a.key, at: 5_000)
        index.recordAccess(a.key, at: 7_000)
        index.recordAccess(a.key, at: 6_000)
        #expect(try index.entry(for: a.key)?.lastAccess == 1_000)
        #expect(try index.flushAccesses() == 1)
        let row = try #require(try index.entry(for: a.key))
        #expect(row.lastAccess == 7_000)
        #expect(row.hitCount == 3)
        #expect(try index.flushAccesses() == 0)
        try index.close()
    }

    @Test("after an unclean shutdown, older rows need verification; a clean close trusts them again")
    func uncleanShutdown() throws {
        let folder = try scratch()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/index.sqlite"
        let a = try entry("a")
        do {
            let index = try CacheIndex(path: path)
            #expect(index.previousShutdownWasClean)
            try index.insert([a])
            // No close(): the process "dies" here.
        }
        let afterCrash = try CacheIndex(path: path)
        #expect(!afterCrash.previousShutdownWasClean)
        #expect(try afterCrash.entry(for: a.key)?.needsVerification == true)
        try afterCrash.markVerified(a.key)
        #expect(try afterCrash.entry(for: a.key)?.needsVerification == false)
        try afterCrash.close()
        let clean = try CacheIndex(path: path)
        #expect(clean.previousShutdownWasClean)
        #expect(try clean.entry(for: a.key)?.needsVerification == false)
        try clean.close()
    }

    @Test("a stop that did not sync is clean for the rest of the boot; after a restart its entries are checked before use")
    func unsyncedStopIsCleanUntilReboot() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let content = Array("pretend png".utf8)
        let kept = try entry("kept", bytes: content.count, content: content)
        let lost = try entry("lost", bytes: content.count, content: content)
        do {
            let disk = try DiskCache(root: root)
            for item in [kept, lost] {
                let file = try disk.directory.makeTempFile(for: item.key)
                try content.withUnsafeBytes { try file.write($0) }
                try disk.directory.publish(file, as: item.key)
            }
            try disk.record([kept, lost])
            try disk.close(syncing: false)
        }
        // The same boot: trusted as after any clean stop.
        do {
            let disk = try DiskCache(root: root)
            #expect(disk.index.previousShutdownWasClean)
            #expect(!disk.index.previousStopUnsyncedBeforeRestart)
            #expect(disk.lookup(kept.key)?.entry.needsVerification == false)
            try disk.close(syncing: false)
        }
        // A restart of the machine before writeback (what a power cut is) lost a file's data:
        // another boot's ID in the record stands for it. The next start treats the stop as
        // unclean, and the damaged entry is found at its first use.
        let otherBoot = (BootIdentity.current ?? 0) &+ 1
        do {
            let connection = try SQLiteConnection(path: root + "/index.sqlite")
            try CacheIndex.setMeta(connection, CacheIndex.unsyncedBootKey, otherBoot)
        }
        try Data("pretend pnG".utf8).write(to: URL(fileURLWithPath: root + "/" + lost.key.relativePath))
        let disk = try DiskCache(root: root)
        #expect(!disk.index.previousShutdownWasClean)
        #expect(disk.index.previousStopUnsyncedBeforeRestart, "the cause is told apart from a crash")
        #expect(disk.lookup(kept.key)?.entry.needsVerification == true, "checked on its first use")
        #expect(disk.lookup(lost.key) == nil)
        // A synced stop vouches for the files across restarts again.
        try disk.close()
        do {
            let connection = try SQLiteConnection(path: root + "/index.sqlite")
            #expect(try CacheIndex.meta(connection, CacheIndex.unsyncedBootKey) == nil)
        }
        let afterSync = try DiskCache(root: root)
        #expect(afterSync.index.previousShutdownWasClean)
        try afterSync.close()
    }

    @Test("the disk tier drops an entry whose file size is wrong, and one whose content fails its SHA-256 after a crash")
    func lookupChecks() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let content = Array("pretend png".utf8)
        let good = try entry("good", bytes: content.count, content: content)
        let resized = try entry("resized", bytes: content.count, content: content)
        let corrupt = try entry("corrupt", bytes: content.count, content: content)
        do {
            let disk = try DiskCache(root: root)
            for item in [good, resized, corrupt] {
                let file = try disk.directory.makeTempFile(for: item.key)
                try content.withUnsafeBytes { try file.write($0) }
                try disk.directory.publish(file, as: item.key)
            }
            try disk.record([good, resized, corrupt])
            #expect(disk.lookup(good.key) != nil)
            // Crash without close(); meanwhile the files change behind imgd's back.
        }
        try Data("pretend png, longer".utf8).write(to: URL(fileURLWithPath: root + "/" + resized.key.relativePath))
        try Data("pretend pnG".utf8).write(to: URL(fileURLWithPath: root + "/" + corrupt.key.relativePath))
        let disk = try DiskCache(root: root)
        #expect(disk.lookup(good.key)?.entry.needsVerification == true, "verified on this first use…")
        #expect(disk.lookup(good.key)?.entry.needsVerification == false, "…and trusted afterwards")
        #expect(disk.lookup(resized.key) == nil)
        #expect(disk.lookup(corrupt.key) == nil)
        #expect(!FileManager.default.fileExists(atPath: root + "/" + corrupt.key.relativePath))
        #expect(try disk.index.totals() == (1, content.count))
        try disk.close()
    }

    @Test("a batch lookup finds what a lookup each finds, over several read transactions, and checks each file the same way")
    func batchLookup() throws {
        let fixture = try CacheFixture()
        defer { fixture.remove() }
        let entries = try fixture.fill(150)
        // One file resized behind imgd's back: dropped by both kinds of lookup.
        try Data("other size".utf8).write(to: URL(fileURLWithPath: fixture.disk.directory.path(for: entries[7].key)))
        let missing = try (0..<50).map { try ImageURL("http://example.com/missing\($0).png").cacheKey }
        // More keys than one read transaction takes, present and missing interleaved, one twice.
        let keys = zip(entries.map(\.key), missing + missing + missing).flatMap { [$0, $1] } + [entries[3].key]
        #expect(keys.count > 2 * CacheIndex.keysPerRead)
        let found = fixture.disk.lookup(keys)
        #expect(found.count == entries.count - 1)
        #expect(found[entries[7].key] == nil)
        for entry in entries where entry.key != entries[7].key {
            #expect(found[entry.key] == fixture.disk.lookup(entry.key))
            #expect(found[entry.key]?.path == fixture.disk.directory.path(for: entry.key))
        }
        for key in missing { #expect(found[key] == nil) }
        #expect(fixture.disk.lookup(entries[7].key) == nil)
        #expect(try fixture.disk.index.totals().entries == entries.count - 1)
    }

    @Test("a second owner of the same cache is refused with a message naming the holder, before it touches anything (the first one's arriving body is kept)")
    func singleInstance() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let first = try DiskCache(root: root)
        // A body arriving in the first one's tmp/ when the second one tries to open the cache.
        let key = try ImageURL("http://example.com/arriving.png").cacheKey
        let arriving = try first.directory.makeTempFile(for: key)
        try Array("arriving".utf8).withUnsafeBytes { try arriving.write($0) }
        #expect {
            _ = try DiskCache(root: root)
        } throws: { error in
            "\(error)".contains("another imgd (pid \(getpid())) is using this cache")
        }
        // The refused one touched nothing: the first still publishes its body.
        #expect(try FileManager.default.contentsOfDirectory(atPath: first.directory.tempFolder).count == 1)
        #expect(try first.directory.publish(arriving, as: key) == first.directory.path(for: key))
        #expect(first.directory.existingSize(of: key) == 8)
        try first.close()
    }
}
