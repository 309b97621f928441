import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// Where a background reconcile has got to: it walks the index in key order, then the 256
/// fan-out folders, a slice at a time.
public struct ReconcileCursor: Sendable, Equatable {
    var afterKey: CacheKey?
    var rowsDone = false
    var bucket = 0

    public init() {}

    /// True once every row and every folder has been looked at.
    public var isFinished: Bool { rowsDone && bucket >= 256 }
}

/// What reconciling removed so far.
public struct ReconcileReport: Sendable, Equatable {
    /// Rows whose file was gone (or not a regular file of the recorded size).
    public var rowsWithoutFile = 0
    /// Files no row names (a crash between rename and commit).
    public var filesWithoutRow = 0

    public init() {}
}

extension DiskCache {
    /// Does one budgeted slice of the background reconcile: up to `budget` rows or files looked
    /// at, then returns, so it can run between other work without ever holding a lookup up for
    /// long. Call again with the same cursor until ``ReconcileCursor/isFinished``.
    ///
    /// Rows are checked by size (content hashes are checked lazily, on first use after an
    /// unclean shutdown, or by ``checkAll(sliceSize:onBad:)``). A file without a row is removed
    /// only when it is older than `orphanGrace` milliseconds at `now`: a file just published
    /// gets its row a few milliseconds later, in the publisher's next batch.
    public func reconcile(
        _ cursor: inout ReconcileCursor, budget: Int = DiskCache.evictionPassLimit,
        now: Int = WallClock.nowMilliseconds(), orphanGrace: Int = 60_000
    ) throws(SQLiteError) -> ReconcileReport {
        var report = ReconcileReport()
        var spent = 0
        while !cursor.rowsDone, spent < budget {
            let slice = try index.entries(after: cursor.afterKey, limit: budget - spent)
            guard let last = slice.last else {
                cursor.rowsDone = true
                break
            }
            cursor.afterKey = last.key
            spent += slice.count
            // A key being published may have a new file of another size in place and its new
            // row on the way: not a row without its file.
            let inFlight = publishing.withLock { Set($0.keys) }
            let missing = slice.filter { !inFlight.contains($0.key) && directory.existingSize(of: $0.key) != $0.bytes }
                .map(\.key)
            _ = try removeEntries(missing)
            report.rowsWithoutFile += missing.count
        }
        while cursor.rowsDone, cursor.bucket < 256, spent < budget {
            let folder = directory.root + "/" + Self.bucketPath(cursor.bucket)
            spent += 1  // an empty folder costs a little too
            for name in CacheDirectory.fileNames(in: folder) {
                spent += 1
                guard let key = Self.key(named: name) else {
                    // Not a cache file at all (an editor's backup, a stray copy): not ours to keep.
                    if unlink(folder + "/" + name) == 0 { report.filesWithoutRow += 1 }
                    continue
                }
                guard try index.entry(for: key) == nil else { continue }
                // Looked at and removed under the lock a publish takes first: the file unlinked
                // is the old one looked at, never a new one renamed over it in between.
                let removed = publishing.withLock { publishing in
                    publishing[key] == nil && Self.modified(folder + "/" + name, before: now - orphanGrace)
                        && unlink(folder + "/" + name) == 0
                }
                if removed { report.filesWithoutRow += 1 }
            }
            cursor.bucket += 1
        }
        return report
    }

    /// True when the file at `path` was last modified before `time` (milliseconds since 1970).
    private static func modified(_ path: String, before time: Int) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        return Int(info.st_mtim.tv_sec) * 1000 + Int(info.st_mtim.tv_nsec) / 1_000_000 < time
    }

    /// `ab` for bucket 0xab.
    static func bucketPath(_ bucket: Int) -> String {
        CacheDirectory.hexByte(bucket)
    }

    /// The key a cache file's name spells, or nil if the name is not 64 lower-case hex digits.
    static func key(named name: String) -> CacheKey? {
        let text = Array(name.utf8)
        guard text.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        var index = 0
        while index < 64 {
            guard let high = nibble(text[index]), let low = nibble(text[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return SHA256Digest(bytes: bytes).map(CacheKey.init(digest:))
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
