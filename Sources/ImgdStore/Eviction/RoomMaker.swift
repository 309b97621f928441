import ImgdCore

/// Makes room under the cache's cap for bodies on their way, and frees space the filesystem
/// refused: the cache's answer to a transfer that asks.
///
/// An actor on the cache's ``DiskCache/housekeeping`` executor, which it shares with the
/// ``DiskCacheMaintainer``: the two take turns there, so room is never made in the middle of a
/// maintenance pass, and neither runs on a transfer's or the cooperative pool's thread. The
/// transfer loop is not async: it comes in through ``reserve(_:settlingFirst:reply:)`` and
/// ``freeSpace(_:reply:)``, which enqueue on that executor and run isolated there, in the order
/// asked; the answer goes back through `reply`.
///
/// The one wait on this path — for the publisher to commit rows still pending, when eviction
/// alone found too little — is awaited, not blocked on: the executor serves the maintainer and
/// other requests for room meanwhile.
public actor RoomMaker {
    /// Eviction passes one request for room may run before giving up (and again after settling).
    public static let maxPasses = 8

    /// The cache this actor makes room in: its budget, its index, its executor.
    private nonisolated let cache: DiskCache

    public nonisolated var unownedExecutor: UnownedSerialExecutor { cache.housekeeping.asUnownedSerialExecutor() }

    init(cache: DiskCache) {
        self.cache = cache
    }

    /// Asks for `bytes` more of the cap for a body on its way, and answers later: the work runs
    /// on ``DiskCache/housekeeping``, never on the caller's thread, so a transfer thread that
    /// asks goes on serving its other transfers meanwhile.
    ///
    /// The bytes are reserved at once when they fit; otherwise least recently used entries are
    /// evicted in budgeted passes (at most ``maxPasses``) until they do. When nothing more can
    /// be evicted, `settle` is awaited once — bodies already published but whose rows are not
    /// committed are counted yet cannot be evicted, since eviction goes by the index — and
    /// eviction is tried again. `reply` gets true when the bytes are now reserved for the caller
    /// (who must release them, or have them settled, exactly once), false when they cannot be
    /// had. It runs on the housekeeping executor: keep it short (post the answer to its owner).
    public nonisolated func reserve(
        _ bytes: Int, settlingFirst settle: @escaping @Sendable () async -> Void,
        reply: @escaping @Sendable (Bool) -> Void
    ) {
        cache.housekeeping.enqueue { [self] in
            assumeIsolated { $0.startReserving(bytes, settlingFirst: settle, reply: reply) }
        }
    }

    /// Evicts about `bytes` of least recently used entries for a write the filesystem refused as
    /// full (other files share it), on ``DiskCache/housekeeping``; `reply` runs there once it is
    /// done.
    public nonisolated func freeSpace(_ bytes: Int, reply: @escaping @Sendable () -> Void) {
        cache.housekeeping.enqueue { [self] in
            _ = assumeIsolated { $0.evict(bytes, reason: .space) }
            reply()
        }
    }

    /// The first try, in the order asked; a request eviction alone cannot satisfy waits for the
    /// publisher in a task of its own, isolated here, and tries once more.
    private func startReserving(
        _ bytes: Int, settlingFirst settle: @escaping @Sendable () async -> Void, reply: @escaping @Sendable (Bool) -> Void
    ) {
        if makeRoom(bytes) {
            reply(true)
            return
        }
        Task {
            await settle()
            reply(makeRoom(bytes))
        }
    }

    /// Reserves `bytes`, evicting pass after pass until they fit or nothing is left to evict.
    private func makeRoom(_ bytes: Int) -> Bool {
        let budget = cache.budget
        for _ in 0..<Self.maxPasses {
            if budget.tryReserve(bytes) { return true }
            let snapshot = budget.snapshot
            let free = snapshot.limit - snapshot.stored - snapshot.reserved
            guard evict(bytes - free, reason: .size).files > 0 else { break }
        }
        return budget.tryReserve(bytes)
    }

    /// One eviction pass; an index that refuses counts as nothing evicted (the caller gives up
    /// or the transfer fails with `disk`, which names the cause).
    @discardableResult
    private func evict(_ bytes: Int, reason: EvictionReason) -> EvictionPass {
        (try? cache.evictLeastRecentlyUsed(toFree: bytes, reason: reason)) ?? EvictionPass()
    }
}
