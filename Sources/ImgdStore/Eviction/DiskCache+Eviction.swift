import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// What one eviction pass removed.
public struct EvictionPass: Sendable, Equatable {
    public var files = 0
    public var bytes = 0
    /// True when the pass stopped at its budget with more to do.
    public var isIncomplete = false

    public init(files: Int = 0, bytes: Int = 0, isIncomplete: Bool = false) {
        self.files = files
        self.bytes = bytes
        self.isIncomplete = isIncomplete
    }
}

extension DiskCache {
    /// Files removed per pass at most: a pass is one short read, one short write transaction and
    /// this many unlinks, so a lookup never waits behind it for long.
    public static let evictionPassLimit = 500

    /// Removes least-recently-used, unpinned entries until at least `bytes` are freed or the pass
    /// budget is spent. Rows go first (one transaction), then files: a reader that already has a
    /// file open keeps reading it. Pending access times are written first, so a recent hit
    /// saves its entry. Counted in ``evictions`` under `reason` (``EvictionReason/size``, room
    /// under the cap, by default).
    public func evictLeastRecentlyUsed(
        toFree bytes: Int, now: Int = WallClock.nowMilliseconds(), passLimit: Int = evictionPassLimit,
        reason: EvictionReason = .size
    ) throws(SQLiteError) -> EvictionPass {
        guard bytes > 0 else { return EvictionPass() }
        try index.flushAccesses()
        let candidates = try index.evictionCandidates(now: now, limit: passLimit)
        var chosen: [(key: CacheKey, bytes: Int)] = []
        var freed = 0
        for candidate in candidates where freed < bytes {
            chosen.append(candidate)
            freed += candidate.bytes
        }
        var pass = try remove(chosen, reason: reason)
        pass.isIncomplete = freed < bytes && candidates.count == passLimit
        return pass
    }

    /// Removes `owner`'s least-recently-used, unpinned entries until at least `bytes` are freed
    /// or the pass budget is spent (quotas per user: no other owner's entry is touched).
    /// Pending access times are written first, as for ``evictLeastRecentlyUsed(toFree:now:passLimit:reason:)``.
    /// Counted in ``evictions`` as ``EvictionReason/quota``.
    public func evictLeastRecentlyUsed(
        of owner: UInt32, toFree bytes: Int, now: Int = WallClock.nowMilliseconds(), passLimit: Int = evictionPassLimit
    ) throws(SQLiteError) -> EvictionPass {
        guard bytes > 0 else { return EvictionPass() }
        try index.flushAccesses()
        let candidates = try index.evictionCandidates(owner: owner, now: now, limit: passLimit)
        var chosen: [(key: CacheKey, bytes: Int)] = []
        var freed = 0
        for candidate in candidates where freed < bytes {
            chosen.append(candidate)
            freed += candidate.bytes
        }
        var pass = try remove(chosen, reason: .quota)
        pass.isIncomplete = freed < bytes && candidates.count == passLimit
        return pass
    }

    /// Removes unpinned entries last used before `cutoff` (milliseconds since 1970), oldest first,
    /// at most `passLimit` of them. Counted in ``evictions`` as ``EvictionReason/age``.
    public func evictExpired(
        accessedBefore cutoff: Int, now: Int = WallClock.nowMilliseconds(), passLimit: Int = evictionPassLimit
    ) throws(SQLiteError) -> EvictionPass {
        try index.flushAccesses()
        let candidates = try index.evictionCandidates(now: now, accessedBefore: cutoff, limit: passLimit)
        var pass = try remove(candidates, reason: .age)
        pass.isIncomplete = candidates.count == passLimit
        return pass
    }

    /// Removes the entries of those `keys` that have one, pinned or not (the `evict` command),
    /// counted in ``evictions`` as ``EvictionReason/command``.
    public func evict(_ keys: [CacheKey]) throws(SQLiteError) -> EvictionPass {
        let found = try index.entries(for: keys)
        return try remove(found.values.map { ($0.key, $0.bytes) }, reason: .command)
    }

    /// Rows first (one transaction), then files; then the ledger hears of it. Every eviction
    /// goes through here.
    private func remove(_ victims: [(key: CacheKey, bytes: Int)], reason: EvictionReason) throws(SQLiteError) -> EvictionPass {
        guard !victims.isEmpty else { return EvictionPass() }
        let bytes = try removeEntries(victims.map(\.key))
        evictions.record(Eviction(reason: reason, files: victims.count, bytes: bytes))
        return EvictionPass(files: victims.count, bytes: bytes)
    }
}
