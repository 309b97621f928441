import ImgdCore

/// Something wrong with the disk tier at run time that imgd cannot mend by itself. While one
/// holds, the daemon reports itself degraded, keeps serving what it still has (the memory tier,
/// files it can still read) and checks again later; it does not exit, so systemd does not
/// restart it into the same fault in a loop.
public enum DiskCacheFault: Error, Sendable, Equatable, CustomStringConvertible {
    /// The cache folder was removed and could not be created again.
    case folderMissing(path: String, reason: String)
    /// Files cannot be created in the cache folder (read-only filesystem, permissions, no
    /// space or inodes).
    case notWritable(StoreError)
    /// The cache folder was re-created, but another imgd took its lock meanwhile.
    case lockLost(CacheLockError)
    /// The index could not be opened again after the folder was re-created.
    case indexUnavailable(SQLiteError)

    /// A short, stable name for status output.
    public var code: String {
        switch self {
        case .folderMissing: "cache_folder_missing"
        case .notWritable: "cache_not_writable"
        case .lockLost: "cache_lock_lost"
        case .indexUnavailable: "cache_index_unavailable"
        }
    }

    public var description: String {
        switch self {
        case .folderMissing(let path, let reason): "cache folder \(path) is gone and cannot be created again: \(reason)"
        case .notWritable(let error): "cache folder is not writable: \(error)"
        case .lockLost(let error): "cache folder was re-created but \(error)"
        case .indexUnavailable(let error): "cache index cannot be opened again: \(error)"
        }
    }
}

/// What one health check found.
public struct DiskCacheHealth: Sendable, Equatable {
    /// Faults now; empty when the disk tier works.
    public var faults: [DiskCacheFault] = []
    /// True when this check found the folder removed and made it again (empty): worth a log line.
    public var recreatedFolder = false

    public init(faults: [DiskCacheFault] = [], recreatedFolder: Bool = false) {
        self.faults = faults
        self.recreatedFolder = recreatedFolder
    }
}

extension DiskCache {
    /// Checks that the folder is still in place and writable, and mends what it can: a folder
    /// removed at run time is created again, with a new lock and an empty index, and used from
    /// then on. Cheap (two `stat`s and one file created and removed); the daemon calls it every
    /// few seconds.
    public func checkHealth() -> DiskCacheHealth {
        var health = DiskCacheHealth()
        if !directory.isInPlace {
            do {
                try directory.reopen()
            } catch {
                health.faults.append(.folderMissing(path: directory.root, reason: "\(error)"))
                return health
            }
            do {
                try lock.reacquire()
            } catch {
                health.faults.append(.lockLost(error))
                return health
            }
            do {
                try index.reopen()
                budget.reset(stored: try index.totals().bytes)
            } catch {
                health.faults.append(.indexUnavailable(error))
                return health
            }
            health.recreatedFolder = true
        }
        do {
            try directory.probeWritable()
        } catch {
            health.faults.append(.notWritable(error))
        }
        return health
    }
}
