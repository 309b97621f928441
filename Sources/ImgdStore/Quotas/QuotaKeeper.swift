import ImgdCore

/// Brings users over their quota back under it: for each owner charged since the last pass
/// (``DiskCache/charged(_:)``), when its entries hold more than its limit, evicts its own least
/// recently used, unpinned entries until they do not. Other owners' entries are never touched
/// here; the cache's own cap is kept by the maintainer and the room maker as before.
///
/// An actor on the cache's ``DiskCache/housekeeping`` executor, taking turns there with the
/// maintainer and the room maker; it keeps no state of its own (the owners due and the quotas
/// are the cache's). Each owner gets one budgeted pass (at most
/// ``DiskCache/evictionPassLimit`` entries) per turn; one still over after it is queued again,
/// behind the other work waiting there. `get` never waits for it.
public actor QuotaKeeper {
    private nonisolated let cache: DiskCache

    public nonisolated var unownedExecutor: UnownedSerialExecutor { cache.housekeeping.asUnownedSerialExecutor() }

    init(cache: DiskCache) {
        self.cache = cache
    }

    /// Queues a pass on the housekeeping executor.
    nonisolated func schedule() {
        cache.housekeeping.enqueue { [self] in assumeIsolated { $0.pass() } }
    }

    /// One pass over the owners due; those still over their limit after it are due again.
    private func pass() {
        let (owners, quotas) = cache.takeDueOwners()
        var again: [UInt32] = []
        for owner in owners.sorted() {
            guard let limit = quotas.limit(for: owner) else { continue }
            let now = WallClock.nowMilliseconds()
            guard let usage = try? cache.index.usage(of: owner, now: now), usage.bytes > limit else { continue }
            guard let pass = try? cache.evictLeastRecentlyUsed(of: owner, toFree: usage.bytes - limit, now: now) else { continue }
            // Nothing evicted: the rest is pinned (or being written), and stays.
            if pass.isIncomplete, pass.files > 0 { again.append(owner) }
        }
        if !again.isEmpty { cache.charged(again) }
    }
}
