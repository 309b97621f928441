import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// A cap the cache's filesystem cannot honour: `disk-limit` is more than the space free on it
/// plus what the cache already holds. Other files use the rest, so downloads will fail with
/// ENOSPC (the `disk` error, after one eviction to make room) well before the cache reaches its
/// cap, and the cap protects nothing. The daemon logs it as a warning at start and at each
/// reload, and reports it in `status.degraded` until a reload finds it gone.
public struct DiskSpaceShortfall: Sendable, Equatable, CustomStringConvertible {
    /// The code in `status.degraded`.
    public static let code = "disk_limit_over_free_space"

    /// The cap.
    public let limit: Int
    /// Free on the filesystem for an unprivileged writer (`f_bavail`).
    public let free: Int
    /// Bytes the cache holds (recorded entries).
    public let held: Int
    /// The cache folder.
    public let path: String

    public init(limit: Int, free: Int, held: Int, path: String) {
        self.limit = limit
        self.free = free
        self.held = held
        self.path = path
    }

    public var code: String { Self.code }

    public var description: String {
        "disk-limit \(ByteCount(limit)) is more than the filesystem of \(path) can give the cache "
            + "(\(ByteCount(free)) free + \(ByteCount(held)) cached = \(ByteCount(free + held))): downloads will fail "
            + "with 'disk' (no space left) before the cache reaches its cap; lower disk-limit or free space, then reload"
    }
}

extension DiskCache {
    /// Compares the cap with the filesystem's free space plus what the cache holds; nil when the
    /// cap fits (or the filesystem cannot be asked). One `statvfs`: cheap, but meant for start
    /// and reload, when no download holds temp files that would make free space look smaller.
    public func spaceShortfall() -> DiskSpaceShortfall? {
        var info = statvfs()
        guard statvfs(directory.root, &info) == 0 else { return nil }
        let (bytes, overflow) = UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize))
        let free = overflow ? Int.max : Int(clamping: bytes)
        let budget = budget.snapshot
        guard budget.limit - budget.stored > free else { return nil }
        return DiskSpaceShortfall(limit: budget.limit, free: free, held: budget.stored, path: directory.root)
    }
}
