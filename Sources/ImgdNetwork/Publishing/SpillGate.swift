import Dispatch
import Synchronization

/// Caps the chunks waiting on the spill lanes, all bodies together: the loop waits in
/// ``enter()`` when ``limit`` are queued, until the lanes have written half of them. Nothing a
/// lane does waits for the loop, so the wait always ends.
///
/// Why half, not one: on a large set the lanes (hashing and writing) are the slower side, so the
/// gate is full most of the time. Woken at every chunk a lane wrote, the loop took one chunk and
/// blocked again: two context switches per 64 KiB, most of the loop's off-CPU time in a profile
/// of 200 large images, and a wake-up on the lane's side each time. Woken at half, it takes 32
/// chunks in one go while the lanes still have 32 to write. The price: on a disk that cannot keep
/// up, the loop's longest wait is the lanes writing 32 chunks (2 MiB), not one; an on-demand
/// transfer gets no callbacks meanwhile.
final class SpillGate: Sendable {
    /// Chunks (of up to 64 KiB each) that may wait: 4 MiB.
    static let limit = 64
    /// The queue length at which a waiting loop is woken.
    static let resumeAt = limit / 2

    private struct State {
        var queued = 0
        /// Callers blocked in ``enter()``.
        var waiters = 0
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    /// Callers blocked in ``enter()`` now (for tests).
    var waitingCallers: Int { state.withLock { $0.waiters } }

    /// Counts a chunk in; blocks while ``limit`` are queued, until ``resumeAt`` are left.
    func enter() {
        let mustWait = state.withLock { state in
            guard state.queued >= Self.limit else {
                state.queued += 1
                return false
            }
            state.waiters += 1
            return true
        }
        guard mustWait else { return }
        wake.wait()
        state.withLock { $0.queued += 1 }
    }

    /// Counts a written chunk out; wakes the waiting callers once the queue is down to
    /// ``resumeAt``.
    func leave() {
        let woken = state.withLock { state in
            state.queued -= 1
            guard state.waiters > 0, state.queued <= Self.resumeAt else { return 0 }
            defer { state.waiters = 0 }
            return state.waiters
        }
        for _ in 0..<woken { wake.signal() }
    }
}
