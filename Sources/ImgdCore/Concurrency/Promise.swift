/// A value that is set once, from any thread, and awaited by any number of tasks: imgd's one
/// bridge from "something finishes on a thread of its own" (the transfer engine's, the pressure
/// thread, a queue) to the tasks waiting for it.
///
/// - ``fulfill(_:)`` sets the value and resumes every waiter; the first call wins, later ones are
///   ignored (and say so), so racing finishers (an answer, a cancel, a stop) need no flag of
///   their own to agree on who was first.
/// - ``value`` waits for the value whatever happens to the waiting task; ``wait()`` gives up as
///   soon as the waiting task is cancelled. A waiter that gives up leaves alone: the others
///   still get the value, and the value is still there for later waiters.
/// - Waiting after the value was set returns it at once.
///
/// Every continuation is resumed exactly once: by ``fulfill(_:)`` or, for ``wait()``, by the
/// cancellation, whichever takes the waiter out of the table first (under the lock).
public final class Promise<Value: Sendable>: Sendable {
    private struct State {
        /// Set once, by the first ``fulfill(_:)``.
        var value: Value?
        /// The tasks waiting, by a number each takes before suspending (so that one can leave).
        var waiters: [UInt64: CheckedContinuation<Value?, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    /// Guards the state: a finisher on one thread and waiters on others.
    private let state = Locked(State())

    public init() {}

    /// Sets the value and resumes every waiter with it (outside the lock); true if this call set
    /// it, false if it was set already (the value stays the first one).
    @discardableResult
    public func fulfill(_ value: Value) -> Bool {
        let waiters: [CheckedContinuation<Value?, Never>]? = state.withLock { state in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(returning: value) }
        return true
    }

    /// The value if it is set, without waiting.
    public var current: Value? { state.withLock { $0.value } }

    /// Tasks suspended waiting now (for tests: a waiter is known to wait before the value is set).
    var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// The value, once it is set. Cancelling the waiting task does not end the wait: for a
    /// value that always comes (a thread's outcome, a claim's end) and that the caller must have.
    public var value: Value {
        get async {
            // Nil only for a waiter that leaves on cancellation, which this one never does.
            await suspend(leavingOnCancel: false)!
        }
    }

    /// The value, once it is set; throws `CancellationError` at once if the waiting task is (or
    /// becomes) cancelled first, leaving the value to the other waiters.
    public func wait() async throws(CancellationError) -> Value {
        guard let value = await suspend(leavingOnCancel: true) else { throw CancellationError() }
        return value
    }

    private func suspend(leavingOnCancel: Bool) async -> Value? {
        // Taken before suspending, so that the cancellation handler knows which waiter to remove.
        let number: UInt64? = state.withLock { state in
            guard state.value == nil else { return nil }
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        guard let number else { return current }
        guard leavingOnCancel else {
            return await withCheckedContinuation { register(number, $0, checkingCancellation: false) }
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { register(number, $0, checkingCancellation: true) }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: number) }?.resume(returning: nil)
        }
    }

    /// Adds the waiter `number`, or resumes it at once: with the value if it was set meanwhile,
    /// with nil if its task was cancelled before it could be added (the cancellation handler ran
    /// first and found nothing to remove).
    private func register(_ number: UInt64, _ continuation: CheckedContinuation<Value?, Never>, checkingCancellation: Bool) {
        let (added, now): (Bool, Value?) = state.withLock { state in
            if let value = state.value { return (false, value) }
            if checkingCancellation, Task.isCancelled { return (false, nil) }
            state.waiters[number] = continuation
            return (true, nil)
        }
        if !added { continuation.resume(returning: now) }
    }
}
