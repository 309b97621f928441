import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// What a full check of the disk tier found.
public struct CacheCheckReport: Sendable, Equatable {
    /// Entries whose file was read and hashed.
    public var checked = 0
    /// Entries whose file was missing, of the wrong size, or whose content failed its SHA-256.
    public var bad = 0
    /// Bad entries removed (row, then file).
    public var removed = 0
    /// Files in the cache folder with no row (left by a crash between rename and commit).
    public var orphanFiles = 0
}

extension DiskCache {
    /// Verifies every entry (size and SHA-256), drops the bad ones, and removes files that have
    /// no row. Reads the index in slices of `sliceSize` rows, so memory stays flat. Each dropped
    /// entry is passed to `onBad` with the reason, for the report.
    ///
    /// `removingOrphans: false` is the check of a cache in use (the daemon's `fsck`): a file
    /// published a moment ago has no row until its batch commits, so files without a row are
    /// left to the maintainer's reconcile, which waits out a grace period before removing one.
    public func checkAll(
        sliceSize: Int = 500, removingOrphans: Bool = true, onBad: (IndexEntry, String) -> Void = { _, _ in }
    ) throws(SQLiteError) -> CacheCheckReport {
        var report = CacheCheckReport()
        var known = Set<CacheKey>()
        var last: CacheKey?
        while true {
            let slice = try index.entries(after: last, limit: sliceSize)
            guard let tail = slice.last else { break }
            last = tail.key
            var dropped: [CacheKey] = []
            for entry in slice {
                report.checked += 1
                if removingOrphans { known.insert(entry.key) }
                if let problem = problem(with: entry) {
                    report.bad += 1
                    onBad(entry, problem)
                    dropped.append(entry.key)
                } else if entry.needsVerification {
                    try index.markVerified(entry.key)
                }
            }
            _ = try removeEntries(dropped)
            report.removed += dropped.count
        }
        if removingOrphans { report.orphanFiles = removeFiles(notIn: known) }
        return report
    }

    /// Why `entry` cannot be served, or nil when its file is intact.
    private func problem(with entry: IndexEntry) -> String? {
        let path = directory.path(for: entry.key)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return "file missing (\(String(cString: strerror(errno))))" }
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) == entry.bytes else {
            return "size \(info.st_size) bytes, the index says \(entry.bytes)"
        }
        guard let digest = try? SHA256Digest(fileDescriptor: fd, count: entry.bytes) else {
            return "unreadable (\(String(cString: strerror(errno))))"
        }
        return digest == entry.sha256 ? nil : "content does not match its SHA-256"
    }

    /// Deletes every file under the fan-out folders whose key is not in `known`; returns how many.
    private func removeFiles(notIn known: Set<CacheKey>) -> Int {
        var removed = 0
        for bucket in 0..<256 {
            let folder = directory.root + "/" + Self.bucketPath(bucket)
            for name in CacheDirectory.fileNames(in: folder) {
                if let key = Self.key(named: name), known.contains(key) { continue }
                if unlink(folder + "/" + name) == 0 { removed += 1 }
            }
        }
        return removed
    }
}
