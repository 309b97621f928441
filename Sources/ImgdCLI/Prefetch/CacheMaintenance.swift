import ImgdCore
import ImgdStore

/// The housekeeping a run does on its cache before downloading: drop entries idle for longer
/// than the maximum age, and, if the cap was lowered below what is stored, evict down to the
/// low-water mark. Both run in budgeted passes; each is reported once.
struct CacheMaintenance {
    /// Fraction of the cap eviction brings the cache down to after the cap was crossed (90%).
    static let lowWater = 0.9

    let disk: DiskCache
    let maxAge: Duration

    func atStart(console: Console) throws(SQLiteError) {
        let now = WallClock.nowMilliseconds()
        let cutoff = now - Int(maxAge.components.seconds) * 1000
        var expired = EvictionPass()
        while true {
            let pass = try disk.evictExpired(accessedBefore: cutoff, now: now)
            expired.files += pass.files
            expired.bytes += pass.bytes
            if !pass.isIncomplete { break }
        }
        if expired.files > 0 {
            console.message("imgd: removed \(expired.files) entries (\(ByteCount(expired.bytes))) unused for longer than --max-age")
        }
        let budget = disk.budget.snapshot
        guard budget.stored > budget.limit else { return }
        let target = Int(Double(budget.limit) * Self.lowWater)
        var evicted = EvictionPass()
        while disk.budget.snapshot.stored > target {
            let pass = try disk.evictLeastRecentlyUsed(toFree: disk.budget.snapshot.stored - target, now: now)
            evicted.files += pass.files
            evicted.bytes += pass.bytes
            if pass.files == 0 { break }  // the rest is pinned
        }
        console.message("imgd: the cache held \(ByteCount(budget.stored)), over its \(ByteCount(budget.limit)) limit: evicted \(evicted.files) entries (\(ByteCount(evicted.bytes)))")
    }
}
