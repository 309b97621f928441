import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdStore

@Suite("Disk budget and eviction", .timeLimit(.minutes(5)), .offThePool)
struct DiskEvictionTests {
    /// A disk tier with `count` entries of `size` bytes, last used at 1000, 2000, … ms.
    private func filledCache(_ count: Int, size: Int = 100) throws -> (DiskCache, [IndexEntry], String) {
        let root = try ScratchFolder("imgd-evict").path("cache")
        let disk = try DiskCache(root: root, limit: 1_000_000)
        var entries: [IndexEntry] = []
        for index in 0..<count {
            let url = try ImageURL("http://example.com/e\(index).png")
            let content = [UInt8](repeating: UInt8(index), count: size)
            let file = try disk.directory.makeTempFile(for: url.cacheKey)
            try content.withUnsafeBytes { try file.write($0) }
            try disk.directory.publish(file, as: url.cacheKey)
            entries.append(IndexEntry(
                key: url.cacheKey, url: url.normalized, bytes: size, sha256: SHA256Digest(of: content), format: .png,
                width: 1, height: 1, etag: nil, lastModified: nil, contentType: nil,
                fetchedAt: 1000 * (index + 1), lastAccess: 1000 * (index + 1)))
        }
        try disk.record(entries)
        return (disk, entries, root)
    }

    @Test("the cap is never exceeded while 64 tasks reserve, settle and release at once")
    func budgetUnderContention() async {
        let budget = DiskBudget(limit: 10_000, stored: 2_000)
        await withTaskGroup(of: Int.self) { group in
            for task in 0..<64 {
                group.addTask {
                    var granted = 0
                    for round in 0..<200 {
                        let size = 100 + (task * 7 + round) % 400
                        guard budget.tryReserve(size) else { continue }
                        granted += 1
                        let snapshot = budget.snapshot
                        #expect(snapshot.stored + snapshot.reserved <= snapshot.limit)
                        if round % 3 == 0 {
                            budget.settle(reserved: size, stored: size / 2)
                            budget.removed(size / 2)  // evicted again, to keep room
                        } else {
                            budget.release(size)
                        }
                    }
                    return granted
                }
            }
            var total = 0
            for await granted in group { total += granted }
            #expect(total > 0)
        }
        #expect(budget.snapshot == DiskBudget.Snapshot(limit: 10_000, stored: 2_000, reserved: 0))
        // Every change was checked under the budget's lock, not only the moments sampled above.
        #expect(budget.peakUsed <= 10_000)
        #expect(budget.peakUsed > 2_000)
        #expect(!budget.tryReserve(8_001))
        #expect(budget.tryReserve(8_000))
    }

    @Test("least recently used goes first; a recent hit saves an entry; the budget follows")
    func lruOrder() throws {
        let (disk, entries, root) = try filledCache(5)
        defer { try? FileManager.default.removeItem(atPath: root) }
        disk.index.recordAccess(entries[0].key, at: 99_000)
        #expect(disk.budget.snapshot.stored == 500)
        let pass = try disk.evictLeastRecentlyUsed(toFree: 150, now: 100_000)
        #expect(pass == EvictionPass(files: 2, bytes: 200, isIncomplete: false))
        #expect(try disk.index.entry(for: entries[0].key) != nil, "saved by its recent hit")
        #expect(try disk.index.entry(for: entries[1].key) == nil)
        #expect(try disk.index.entry(for: entries[2].key) == nil)
        #expect(!FileManager.default.fileExists(atPath: disk.directory.path(for: entries[1].key)))
        #expect(try disk.index.entry(for: entries[3].key) != nil)
        #expect(disk.budget.snapshot.stored == 300)
        #expect(try disk.index.totals().bytes == 300)
        try disk.close()
    }

    @Test("every eviction is counted by reason and told to the observer, whoever asked for it; drops are not evictions")
    func ledger() throws {
        let (disk, entries, root) = try filledCache(8)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let seen = Locked<[Eviction]>([])
        disk.evictions.observe { eviction in seen.withLock { $0.append(eviction) } }

        _ = try disk.evictLeastRecentlyUsed(toFree: 150, now: 100_000)  // entries 0 and 1: room, by default
        _ = try disk.evictLeastRecentlyUsed(toFree: 50, now: 100_000, reason: .space)  // entry 2: ENOSPC
        _ = try disk.evictExpired(accessedBefore: 4_500, now: 100_000)  // entry 3
        let byCommand = try disk.evict([entries[5].key, entries[6].key, entries[5].key, entries[0].key])
        #expect(byCommand == EvictionPass(files: 2, bytes: 200))
        #expect(try disk.index.entry(for: entries[6].key) == nil)
        #expect(!FileManager.default.fileExists(atPath: disk.directory.path(for: entries[6].key)))
        _ = try disk.evictExpired(accessedBefore: 1_000, now: 100_000)  // nothing that old: not reported
        disk.drop(entries[7].key)  // a bad entry dropped by a lookup or a check

        #expect(seen.withLock { $0 } == [
            Eviction(reason: .size, files: 2, bytes: 200), Eviction(reason: .space, files: 1, bytes: 100),
            Eviction(reason: .age, files: 1, bytes: 100), Eviction(reason: .command, files: 2, bytes: 200),
        ])
        #expect(disk.evictions.total(.size) == Eviction(reason: .size, files: 2, bytes: 200))
        _ = try disk.evictLeastRecentlyUsed(toFree: 1, now: 100_000)  // entry 4
        #expect(disk.evictions.total(.size) == Eviction(reason: .size, files: 3, bytes: 300))
        #expect(disk.evictions.total(.space).files == 1)
        #expect(disk.evictions.total(.age).files == 1)
        #expect(disk.evictions.total(.command).files == 2)
        #expect(disk.budget.snapshot.stored == 0)
        try disk.close()
    }

    @Test("pinned entries are never evicted by size or age, and are reported apart")
    func pins() throws {
        let (disk, entries, root) = try filledCache(3)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try disk.index.pin(entries[0].key, until: 200_000)
        #expect(try disk.index.pinnedBytes(now: 100_000) == 100)
        let bySize = try disk.evictLeastRecentlyUsed(toFree: 10_000, now: 100_000)
        #expect(bySize.files == 2)
        #expect(try disk.index.entry(for: entries[0].key) != nil)
        let byAge = try disk.evictExpired(accessedBefore: 50_000, now: 100_000)
        #expect(byAge.files == 0)
        // Once the pin has lapsed, the entry is fair game.
        let later = try disk.evictExpired(accessedBefore: 50_000, now: 300_000)
        #expect(later.files == 1)
        try disk.close()
    }

    @Test("age expiry removes what was not used since the cutoff, oldest first, within its pass budget")
    func ageExpiry() throws {
        let (disk, entries, root) = try filledCache(6)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let first = try disk.evictExpired(accessedBefore: 4_500, now: 10_000, passLimit: 2)
        #expect(first == EvictionPass(files: 2, bytes: 200, isIncomplete: true))
        let second = try disk.evictExpired(accessedBefore: 4_500, now: 10_000, passLimit: 2)
        #expect(second.files == 2)
        let third = try disk.evictExpired(accessedBefore: 4_500, now: 10_000, passLimit: 2)
        #expect(third.files == 0)
        #expect(try entries.filter { try disk.index.entry(for: $0.key) != nil }.map(\.lastAccess) == [5_000, 6_000])
        try disk.close()
    }

    @Test("a reopened cache starts its budget from the index totals, without a scan")
    func budgetFromTotals() throws {
        let (disk, _, root) = try filledCache(4, size: 250)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try disk.close()
        let reopened = try DiskCache(root: root, limit: 600)
        #expect(reopened.budget.snapshot == DiskBudget.Snapshot(limit: 600, stored: 1_000, reserved: 0))
        #expect(reopened.budget.snapshot.excess == 400)
        try reopened.close()
    }
}

@Suite("Removals beside a publish of the same key", .timeLimit(.minutes(5)), .offThePool)
struct RemovalDuringPublishTests {
    /// A cache with `url`'s entry recorded (row and file), last used long ago.
    private static func cacheWithOldEntry(_ url: ImageURL) throws -> (DiskCache, String) {
        let root = try ScratchFolder("imgd-publish-race").path("cache")
        let disk = try DiskCache(root: root)
        let old = [UInt8](repeating: 1, count: 30)
        _ = try disk.directory.publishNew(old, as: url.cacheKey)
        try disk.record([entry(url, old)])
        return (disk, root)
    }

    private static func entry(_ url: ImageURL, _ content: [UInt8]) -> IndexEntry {
        IndexEntry(
            key: url.cacheKey, url: url.normalized, bytes: content.count, sha256: SHA256Digest(of: content), format: .png,
            width: 1, height: 1, etag: nil, lastModified: nil, contentType: nil, fetchedAt: 1, lastAccess: 1)
    }

    /// The new body of a fetch, renamed over the old file, its row not recorded yet.
    private static func publishNewBody(_ url: ImageURL, in disk: DiskCache) throws -> [UInt8] {
        let new = [UInt8](repeating: 2, count: 45)
        disk.beginPublishing(url.cacheKey)
        let file = try disk.directory.makeTempFile(for: url.cacheKey)
        try file.write(new)
        try disk.directory.publish(file, as: url.cacheKey)
        return new
    }

    @Test("the age sweep, an eviction or a bad lookup that removes a key's row while a new body of it is being published leaves the new file for its row")
    func removalsSpareTheNewFile() throws {
        for removal in ["age", "evict", "drop"] {
            let url = try ImageURL("http://example.com/\(removal).png")
            let (disk, root) = try Self.cacheWithOldEntry(url)
            defer { try? FileManager.default.removeItem(atPath: root) }
            let new = try Self.publishNewBody(url, in: disk)
            switch removal {
            case "age": #expect(try disk.evictExpired(accessedBefore: WallClock.nowMilliseconds()).files == 1)
            case "evict": #expect(try disk.evict([url.cacheKey]).files == 1)
            default: disk.drop(url.cacheKey)
            }
            // The publish ends: its row is recorded, and names the new file, whole.
            try disk.record([Self.entry(url, new)])
            disk.endPublishing([url.cacheKey])
            let found = disk.lookup(url.cacheKey)
            #expect(found?.entry.bytes == new.count, "after \(removal)")
            #expect(FileManager.default.contents(atPath: disk.directory.path(for: url.cacheKey)).map(Array.init) == new, "after \(removal)")
            try disk.close()
        }
    }

    @Test("a publish ends with its row's commit: an eviction of the new row right after takes its file too, leaving nothing uncounted on disk")
    func publishEndsWithItsCommit() throws {
        for removal in ["size", "age", "evict", "drop"] {
            let url = try ImageURL("http://example.com/ended-\(removal).png")
            let (disk, root) = try Self.cacheWithOldEntry(url)
            defer { try? FileManager.default.removeItem(atPath: root) }
            let new = try Self.publishNewBody(url, in: disk)
            try disk.record([Self.entry(url, new)], endingPublishing: [url.cacheKey])
            // No endPublishing call follows: the commit ended the publish, so nothing guards the
            // file any more. (Ended only after the write lock was let go, an eviction that came in
            // between skipped the unlink, and the file stayed with no row, over the cap.)
            switch removal {
            case "size": #expect(try disk.evictLeastRecentlyUsed(toFree: 1).files == 1)
            case "age": #expect(try disk.evictExpired(accessedBefore: WallClock.nowMilliseconds() + 1).files == 1)
            case "evict": #expect(try disk.evict([url.cacheKey]).files == 1)
            default: disk.drop(url.cacheKey)
            }
            #expect(disk.lookup(url.cacheKey) == nil, "after \(removal)")
            #expect(!FileManager.default.fileExists(atPath: disk.directory.path(for: url.cacheKey)), "after \(removal): a file with no row")
            #expect(disk.budget.snapshot.stored == 0, "after \(removal)")
            try disk.close()
        }
    }

    @Test("with no publish of the key, a removal takes the file with the row")
    func removalWithoutPublishTakesTheFile() throws {
        let url = try ImageURL("http://example.com/alone.png")
        let (disk, root) = try Self.cacheWithOldEntry(url)
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(try disk.evictExpired(accessedBefore: WallClock.nowMilliseconds()).files == 1)
        #expect(!FileManager.default.fileExists(atPath: disk.directory.path(for: url.cacheKey)))
        try disk.close()
    }
}

@Suite("Background reconcile", .timeLimit(.minutes(5)), .offThePool)
struct ReconcileTests {
    @Test("slices remove rows without files and files without rows, and keep everything else")
    func reconcile() throws {
        let root = try ScratchFolder("imgd-reconcile").path("cache")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let disk = try DiskCache(root: root)
        var entries: [IndexEntry] = []
        for index in 0..<30 {
            let url = try ImageURL("http://example.com/r\(index).png")
            let content = [UInt8](repeating: UInt8(index), count: 50)
            let file = try disk.directory.makeTempFile(for: url.cacheKey)
            try content.withUnsafeBytes { try file.write($0) }
            try disk.directory.publish(file, as: url.cacheKey)
            entries.append(IndexEntry(
                key: url.cacheKey, url: url.normalized, bytes: 50, sha256: SHA256Digest(of: content), format: .png,
                width: 1, height: 1, etag: nil, lastModified: nil, contentType: nil, fetchedAt: 1, lastAccess: 1))
        }
        // As a crash would leave it: the last 5 files were renamed but their rows never committed,
        // and 3 rows lost their files.
        try disk.record(Array(entries.prefix(25)))
        for entry in entries.prefix(3) { try FileManager.default.removeItem(atPath: disk.directory.path(for: entry.key)) }
        let junk = root + "/" + DiskCache.bucketPath(0x12)
        try Data("junk".utf8).write(to: URL(fileURLWithPath: junk + "/notes.txt"))

        var cursor = ReconcileCursor()
        var total = ReconcileReport()
        var slices = 0
        while !cursor.isFinished {
            // Two minutes on: the orphans are past their grace.
            let report = try disk.reconcile(&cursor, budget: 7, now: WallClock.nowMilliseconds() + 120_000)
            total.rowsWithoutFile += report.rowsWithoutFile
            total.filesWithoutRow += report.filesWithoutRow
            slices += 1
        }
        #expect(total.rowsWithoutFile == 3)
        #expect(total.filesWithoutRow == 6)
        #expect(slices > 4, "the work was cut into budgeted slices")
        #expect(try disk.index.totals() == (22, 22 * 50))
        #expect(disk.budget.snapshot.stored == 22 * 50)
        for entry in entries[3..<25] { #expect(disk.lookup(entry.key) != nil) }
        for entry in entries[25...] { #expect(!FileManager.default.fileExists(atPath: disk.directory.path(for: entry.key))) }
        try disk.close()
    }

    @Test("a file just published keeps its place until its row, due milliseconds later, can arrive")
    func youngOrphanIsKept() throws {
        let root = try ScratchFolder("imgd-reconcile").path("cache")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let disk = try DiskCache(root: root)
        let url = try ImageURL("http://example.com/young.png")
        let file = try disk.directory.makeTempFile(for: url.cacheKey)
        try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try file.write($0) }
        try disk.directory.publish(file, as: url.cacheKey)
        var cursor = ReconcileCursor()
        var removed = 0
        while !cursor.isFinished { removed += try disk.reconcile(&cursor).filesWithoutRow }
        #expect(removed == 0)
        #expect(FileManager.default.fileExists(atPath: disk.directory.path(for: url.cacheKey)))
        try disk.close()
    }

    @Test("an old orphan whose key is being published again is left alone (the new file may be renamed over it at any moment); once its row is recorded it is an entry")
    func orphanBeingPublishedIsKept() throws {
        let root = try ScratchFolder("imgd-reconcile").path("cache")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let disk = try DiskCache(root: root)
        // What a kill between a publish and its row's batch leaves: a file without a row, old by
        // the time the next run's reconcile looks, while that run fetches the URL again.
        let url = try ImageURL("http://example.com/again.png")
        let content = [UInt8](repeating: 7, count: 40)
        _ = try disk.directory.publishNew(content, as: url.cacheKey)
        let later = WallClock.nowMilliseconds() + 120_000
        disk.beginPublishing(url.cacheKey)
        var cursor = ReconcileCursor()
        var removed = 0
        while !cursor.isFinished { removed += try disk.reconcile(&cursor, now: later).filesWithoutRow }
        #expect(removed == 0)
        #expect(FileManager.default.fileExists(atPath: disk.directory.path(for: url.cacheKey)))
        // The publish ends with its row: an entry, whole.
        try disk.record([IndexEntry(
            key: url.cacheKey, url: url.normalized, bytes: 40, sha256: SHA256Digest(of: content), format: .png,
            width: 1, height: 1, etag: nil, lastModified: nil, contentType: nil, fetchedAt: 1, lastAccess: 1)])
        disk.endPublishing([url.cacheKey])
        #expect(disk.lookup(url.cacheKey) != nil)
        // Without a publish in progress, the same old orphan is removed.
        let other = try ImageURL("http://example.com/orphan.png")
        _ = try disk.directory.publishNew(content, as: other.cacheKey)
        cursor = ReconcileCursor()
        removed = 0
        while !cursor.isFinished { removed += try disk.reconcile(&cursor, now: later).filesWithoutRow }
        #expect(removed == 1)
        #expect(!FileManager.default.fileExists(atPath: disk.directory.path(for: other.cacheKey)))
        #expect(disk.lookup(url.cacheKey) != nil)
        try disk.close()
    }
}
