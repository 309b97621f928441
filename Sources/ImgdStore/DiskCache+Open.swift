import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// What ``DiskCache/openVerified(_:)`` found.
public enum VerifiedOpen: Sendable, Equatable {
    /// The entry's file, open, and its row: the descriptor holds the very bytes the row
    /// describes (size and SHA-256), whatever happens to the name afterwards.
    case opened(OpenedEntryFile, CachedEntry)
    /// No entry (no file, no row, or one of them bad).
    case missing
    /// A body of the key is being given its name and its row is not committed yet: the file and
    /// the row may not match; ask again once the publisher has settled.
    case publishing
}

extension DiskCache {
    /// Opens `key`'s entry for a reader that must get exactly what the index says (an ETag that
    /// is the SHA-256, a descriptor handed to another process), not a path that may change
    /// between the answer and the reader's `open`:
    /// 1. the file is opened;
    /// 2. a key being published is reported as such (its rename may have outrun its row);
    /// 3. the row is looked up as ``lookup(_:)`` does (size checked, content verified when due);
    /// 4. the name must still lead to the file opened, with the row's size; if a new file took
    ///    the name in between, this is tried once more.
    public func openVerified(_ key: CacheKey) -> VerifiedOpen {
        for _ in 0..<2 {
            guard let file = directory.openEntry(key) else {
                return publishing.withLock { $0[key] != nil } ? .publishing : .missing
            }
            if publishing.withLock({ $0[key] != nil }) {
                Glibc.close(file.descriptor)
                return .publishing
            }
            guard let found = lookup(key) else {
                Glibc.close(file.descriptor)
                return .missing
            }
            if found.entry.bytes == file.size, directory.names(file, as: key) {
                return .opened(file, found)
            }
            Glibc.close(file.descriptor)  // replaced between the open and the look: once more
        }
        return .missing
    }
}
