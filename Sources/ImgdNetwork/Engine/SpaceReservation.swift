import ImgdStore

/// Disk space held against the cache's cap for one body while it arrives, and until its file
/// is recorded. Grows as needed: to the declared Content-Length at once, or in ``chunk``s as an
/// undeclared body streams. When the cap is reached it evicts least-recently-used entries and
/// tries again; if the space still cannot be had, the body does not fit (`disk_full`).
///
/// Space held for bodies that are published but whose rows the publisher has not yet committed
/// cannot be evicted (eviction goes by the index): before failing, a reservation asks the
/// publisher to finish what it holds and commit it (``settlePublished``), then evicts again.
///
/// Owned by whoever holds the body (the transfer loop, then the publisher); released exactly once.
final class SpaceReservation {
    /// Reservation step for a body without Content-Length.
    static let chunk = 256 * 1024

    private let disk: DiskCache
    /// Returns once every body handed to the publisher so far is recorded (or failed).
    private let settlePublished: () -> Void
    private(set) var bytes = 0

    init(disk: DiskCache, settlePublished: @escaping () -> Void) {
        self.disk = disk
        self.settlePublished = settlePublished
    }

    deinit { release() }

    /// Makes sure `total` bytes are held; false when they cannot be, even after evicting.
    func ensure(_ total: Int, declared: Bool) -> Bool {
        guard total > bytes else { return true }
        let wanted = declared ? total - bytes : ((total - bytes + Self.chunk - 1) / Self.chunk) * Self.chunk
        if reserve(wanted) { return true }
        // Part of what is held may be bodies waiting for their rows: once committed, they can be
        // evicted like any other entry.
        settlePublished()
        return reserve(wanted)
    }

    /// Reserves `wanted` more bytes, evicting in budgeted passes until the space is there or
    /// nothing evictable is left.
    private func reserve(_ wanted: Int) -> Bool {
        for _ in 0..<Self.maxEvictionPasses {
            if disk.budget.tryReserve(wanted) {
                bytes += wanted
                return true
            }
            let budget = disk.budget.snapshot
            let free = budget.limit - budget.stored - budget.reserved
            guard let pass = try? disk.evictLeastRecentlyUsed(toFree: wanted - free), pass.files > 0 else { break }
        }
        guard disk.budget.tryReserve(wanted) else { return false }
        bytes += wanted
        return true
    }

    /// Eviction passes one reservation may run before giving up.
    static let maxEvictionPasses = 8

    /// The space was given back by the budget itself, in the step that counted the file as
    /// stored (``DiskCache/record(_:releasing:)``): nothing is left to release.
    func settled() { bytes = 0 }

    /// Gives the space back (the body failed, or its file is now counted as stored).
    func release() {
        guard bytes > 0 else { return }
        disk.budget.release(bytes)
        bytes = 0
    }
}
