import ImgdCore

/// Bounds how many URLs of one list are handed to the downloader and not yet answered.
///
/// The reader ``acquire(_:)``s room before submitting a batch and suspends when the window is
/// full; each answer ``release()``s one place (on the downloader's thread), and resumes the
/// reader once a whole batch fits again — one thread hop per batch rather than one per URL.
/// The mutex guards the count and the one waiting reader's ``Promise``.
final class PrefetchWindow: Sendable {
    private struct State {
        var outstanding = 0
        /// The reader waiting for room: how much, and where it is told it has it.
        var waiter: (needed: Int, room: Promise<Void>)?
    }

    /// URLs that may be outstanding at once.
    let size: Int
    private let state = Locked(State())

    init(size: Int) { self.size = size }

    /// Waits until `count` more URLs fit (a batch larger than the window waits for an empty
    /// window), then counts them as outstanding. One reader at a time.
    func acquire(_ count: Int) async {
        let room: Promise<Void>? = state.withLock { state in
            guard !Self.fits(count, state.outstanding, size) else {
                state.outstanding += count
                return nil
            }
            let room = Promise<Void>()
            state.waiter = (count, room)
            return room
        }
        // Counted as outstanding by the release that makes room, before it fulfils this.
        await room?.value
    }

    /// One outstanding URL was answered.
    func release() {
        let room: Promise<Void>? = state.withLock { state in
            state.outstanding -= 1
            guard let waiter = state.waiter, Self.fits(waiter.needed, state.outstanding, size) else { return nil }
            state.outstanding += waiter.needed
            state.waiter = nil
            return waiter.room
        }
        room?.fulfill(())
    }

    /// Waits until every outstanding URL has been answered.
    func waitUntilEmpty() async {
        await acquire(size)
        state.withLock { $0.outstanding -= size }
    }

    private static func fits(_ count: Int, _ outstanding: Int, _ size: Int) -> Bool {
        outstanding + count <= size || outstanding == 0
    }
}
