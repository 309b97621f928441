import ImgdCore

/// The hard cap on the disk tier's size, and the bytes counted against it.
///
/// Bytes are either *stored* (files with an index row) or *reserved* (bodies on their way: a
/// declared Content-Length at the headers, or chunks as an undeclared body streams). A
/// reservation is granted only if stored + reserved stays within the limit, so the cache never
/// exceeds it, even while many transfers start at once; when one is refused, the caller evicts
/// and tries again, and fails with `disk_full` if it still does not fit. A reservation is
/// settled into stored bytes (at the real size) when its file is published, or released when
/// the transfer fails. One mutex guards the counts.
public final class DiskBudget: Sendable {
    /// A consistent reading of the counts.
    public struct Snapshot: Sendable, Equatable {
        public var limit: Int
        public var stored: Int
        public var reserved: Int

        public init(limit: Int, stored: Int, reserved: Int) {
            self.limit = limit
            self.stored = stored
            self.reserved = reserved
        }

        /// Bytes that must go before `stored + reserved` is within the limit again (0 if it is).
        public var excess: Int { max(0, stored + reserved - limit) }
    }

    /// The counts and the most bytes they ever held at once.
    private struct Counts {
        var snapshot: Snapshot
        var peakUsed: Int

        /// Notes a rise of stored + reserved.
        mutating func noteUse() {
            peakUsed = max(peakUsed, snapshot.stored + snapshot.reserved)
        }
    }

    private let state: Locked<Counts>

    /// A budget of `limit` bytes of which `stored` are already used.
    public init(limit: Int, stored: Int) {
        state = Locked(Counts(snapshot: Snapshot(limit: limit, stored: stored, reserved: 0), peakUsed: stored))
    }

    public var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// The most stored + reserved bytes there ever were at once, taken at every change under the
    /// lock (not sampled): what shows the limit held at every moment, not just when looked at.
    public var peakUsed: Int { state.withLock { $0.peakUsed } }

    /// Reserves `bytes` if they fit; false (and nothing reserved) if they do not.
    public func tryReserve(_ bytes: Int) -> Bool {
        state.withLock { counts in
            guard bytes >= 0, counts.snapshot.stored + counts.snapshot.reserved + bytes <= counts.snapshot.limit else { return false }
            counts.snapshot.reserved += bytes
            counts.noteUse()
            return true
        }
    }

    /// Gives back a reservation that will not be used (a failed or cancelled transfer).
    public func release(_ bytes: Int) {
        state.withLock { $0.snapshot.reserved -= bytes }
    }

    /// Turns a reservation of `reserved` bytes into `stored` stored bytes (the file's real size).
    public func settle(reserved: Int, stored: Int) {
        state.withLock { counts in
            counts.snapshot.reserved -= reserved
            counts.snapshot.stored += stored
            counts.noteUse()
        }
    }

    /// Stored bytes removed (eviction, a bad entry dropped).
    public func removed(_ bytes: Int) {
        state.withLock { $0.snapshot.stored -= bytes }
    }

    /// Starts counting stored bytes afresh at `stored` (the cache folder was re-created empty);
    /// reservations in progress stay.
    public func reset(stored: Int) {
        state.withLock { counts in
            counts.snapshot.stored = stored
            counts.noteUse()
        }
    }

    /// Changes the limit (a reload). Lowering it below what is used leaves ``Snapshot/excess``
    /// for eviction to remove.
    public func setLimit(_ limit: Int) {
        state.withLock { $0.snapshot.limit = limit }
    }
}
