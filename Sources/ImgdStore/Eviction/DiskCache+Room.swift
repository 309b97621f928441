import ImgdCore

extension DiskCache {
    /// Eviction passes one request for room may run before giving up.
    public static let maxRoomPasses = 8

    /// Asks for `bytes` more of the cap for a body on its way, and answers later: the work runs
    /// on ``housekeeping``, never on the caller's thread, so a transfer thread that asks goes on
    /// serving its other transfers meanwhile.
    ///
    /// The bytes are reserved at once when they fit; otherwise least recently used entries are
    /// evicted in budgeted passes (at most ``maxRoomPasses``) until they do. When nothing more
    /// can be evicted, `settlingFirst` runs once — bodies already published but whose rows are
    /// not committed are counted yet cannot be evicted, since eviction goes by the index — and
    /// eviction is tried again. `reply` gets true when the bytes are now reserved for the caller
    /// (who must release them, or have them settled, exactly once), false when they cannot be
    /// had. It runs on the housekeeping queue: keep it short (post the answer to its owner).
    public func reserveRoom(
        _ bytes: Int, settlingFirst settle: @escaping @Sendable () -> Void, reply: @escaping @Sendable (Bool) -> Void
    ) {
        housekeeping.enqueue { [self] in
            if makeRoom(bytes) {
                reply(true)
                return
            }
            settle()
            reply(makeRoom(bytes))
        }
    }

    /// Evicts about `bytes` of least recently used entries for a write the filesystem refused as
    /// full (other files share it), on ``housekeeping``; `reply` runs there once it is done.
    public func freeSpace(_ bytes: Int, reply: @escaping @Sendable () -> Void) {
        housekeeping.enqueue { [self] in
            _ = try? evictLeastRecentlyUsed(toFree: bytes, reason: .space)
            reply()
        }
    }

    /// Reserves `bytes`, evicting pass after pass until they fit or nothing is left to evict.
    private func makeRoom(_ bytes: Int) -> Bool {
        for _ in 0..<Self.maxRoomPasses {
            if budget.tryReserve(bytes) { return true }
            let snapshot = budget.snapshot
            let free = snapshot.limit - snapshot.stored - snapshot.reserved
            guard let pass = try? evictLeastRecentlyUsed(toFree: bytes - free), pass.files > 0 else { break }
        }
        return budget.tryReserve(bytes)
    }
}
