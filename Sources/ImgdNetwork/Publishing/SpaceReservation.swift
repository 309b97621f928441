import ImgdStore
import Synchronization

/// Disk space held against the cache's cap for one body while it arrives, and until its file
/// is recorded. Grows as needed: by exactly what has arrived while the first bytes are being
/// sniffed, then to the declared Content-Length at once, or in ``chunk``s as an undeclared body
/// streams.
///
/// It only ever takes space that is free: when the cap is reached, the transfer asks the cache
/// for room (``RoomMaker/reserve(_:settlingFirst:reply:)``, which evicts on the cache's own
/// queue) and adopts what it is granted; the transfer thread never evicts.
///
/// Owned by whoever holds the body (the transfer loop, then the publisher); released exactly
/// once. The count is atomic so that it can move with the body from thread to thread; it is
/// never changed from two at once.
final class SpaceReservation: Sendable {
    /// Reservation step for a body without Content-Length.
    static let chunk = 256 * 1024

    private let budget: DiskBudget
    private let held = Atomic<Int>(0)

    /// Bytes held now.
    var bytes: Int { held.load(ordering: .relaxed) }

    init(budget: DiskBudget) {
        self.budget = budget
    }

    deinit { release() }

    /// Holds `total` bytes if they are held already or free now: exactly `total` when `exact`,
    /// else rounded up to whole ``chunk``s. Otherwise nothing changes and the answer is the bytes
    /// still wanted, to ask the cache for (``adopt(_:)`` them once granted); 0 when `total` is held.
    func shortfall(holding total: Int, exact: Bool) -> Int {
        guard total > bytes else { return 0 }
        let wanted = exact ? total - bytes : ((total - bytes + Self.chunk - 1) / Self.chunk) * Self.chunk
        guard budget.tryReserve(wanted) else { return wanted }
        held.add(wanted, ordering: .relaxed)
        return 0
    }

    /// Takes over `granted` bytes the cache reserved for this body.
    func adopt(_ granted: Int) {
        held.add(granted, ordering: .relaxed)
    }

    /// The space was given back by the budget itself, in the step that counted the file as
    /// stored (``DiskCache/record(_:releasing:)``): nothing is left to release.
    func settled() { held.store(0, ordering: .relaxed) }

    /// Gives the space back (the body failed, or its file is now counted as stored).
    func release() {
        let bytes = held.exchange(0, ordering: .relaxed)
        guard bytes > 0 else { return }
        budget.release(bytes)
    }
}
