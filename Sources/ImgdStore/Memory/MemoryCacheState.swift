import ImgdCore

/// Everything ``MemoryCache`` guards with its mutex: the entries in recency order, the limits,
/// the counters and the end of the cool-down. Plain value logic; the clock is passed in so
/// it is read only when a cool-down is pending.
struct MemoryCacheState {
    var entries = LRUList<CacheKey, MemoryImage>()
    var limitBytes: Int
    var limitEntries: Int
    let coolDown: Duration
    var hits = 0
    var misses = 0
    var purges = 0
    var rejected = 0
    /// When inserts are accepted again; nil when not cooling down.
    var coolingDownUntil: ContinuousClock.Instant?

    /// The largest object kept: 1/8 of the byte limit, so one image can never push out most of
    /// the working set.
    var largestObject: Int { limitBytes / 8 }

    mutating func image(for key: CacheKey) -> MemoryImage? {
        if let image = entries.touch(key) {
            hits += 1
            return image
        }
        misses += 1
        return nil
    }

    mutating func insert(_ image: MemoryImage, for key: CacheKey, now: () -> ContinuousClock.Instant) {
        guard !isCoolingDown(now: now), image.bytes.count <= largestObject else {
            rejected += 1
            // An older version must not be served in place of the refused one.
            entries.remove(key)
            return
        }
        entries.set(image, cost: image.bytes.count, for: key)
        evictToLimits()
    }

    mutating func purge(now: ContinuousClock.Instant) {
        entries.removeAll()
        purges += 1
        coolingDownUntil = now + coolDown
    }

    mutating func setLimits(bytes: Int, entries limit: Int) {
        limitBytes = bytes
        limitEntries = limit
        entries.removeAll(costlierThan: largestObject)
        evictToLimits()
    }

    mutating func isCoolingDown(now: () -> ContinuousClock.Instant) -> Bool {
        guard let until = coolingDownUntil else { return false }
        if now() < until { return true }
        coolingDownUntil = nil
        return false
    }

    mutating func statistics(now: () -> ContinuousClock.Instant) -> MemoryCache.Statistics {
        MemoryCache.Statistics(
            hits: hits, misses: misses, bytes: entries.totalCost, entries: entries.count,
            purges: purges, rejected: rejected, limitBytes: limitBytes, limitEntries: limitEntries,
            isCoolingDown: isCoolingDown(now: now))
    }

    /// Drops the least recent entries until both limits hold.
    private mutating func evictToLimits() {
        while entries.totalCost > limitBytes || entries.count > limitEntries {
            entries.removeOldest()
        }
    }
}
