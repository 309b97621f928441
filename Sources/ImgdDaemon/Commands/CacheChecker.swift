import ImgdCore
import ImgdStore
import Logging

/// Runs `fsck`'s check of the whole disk tier (``DiskCache/checkAll(sliceSize:removingOrphans:onBad:)``)
/// on a serial queue of its own: the check reads every file and blocks on SQLite, so it stays off
/// the cooperative pool, and off the housekeeping queue, where a long check would hold up the
/// room arriving bodies ask for. ``DaemonServices`` owns it; ``DaemonServices/checking`` keeps
/// it to one check at a time.
actor CacheChecker {
    private nonisolated let executor = QueueExecutor(label: "imgd.cache-check")

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Verifies every entry of `disk` (a cache in use: files without a row are left to the
    /// maintainer), drops the bad ones from `memory` too, logs each, and tells how many bytes
    /// they held.
    func check(_ disk: DiskCache, memory: MemoryCache, logger: Logger)
        -> Result<(report: CacheCheckReport, bytes: Int), SQLiteError>
    {
        var bytes = 0
        let checked = Result { () throws(SQLiteError) in
            try disk.checkAll(removingOrphans: false) { entry, problem in
                memory.remove(entry.key)
                bytes += entry.bytes
                var entryLogger = logger
                entryLogger[metadataKey: "url"] = "\(entry.url)"
                entryLogger.warning("fsck: entry removed: \(problem)")
            }
        }
        return checked.map { ($0, bytes) }
    }
}
