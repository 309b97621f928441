import Foundation

/// A task executor that never makes a job wait for a thread: a job runs at once on an idle
/// thread of its own, or on a new one. Never on Swift's cooperative pool.
///
/// For code that blocks in its tasks: Swift Testing's exit tests (`#expect(processExitsWith:)`)
/// read the child's back channel and standard streams with blocking reads in child tasks until
/// the child exits, and tests that open, fill or remove caches block in system calls between
/// their awaits. On the pool (2 threads here, shared by every test running at once) one such
/// call froze the whole run for as long as it blocked. Under ``offThePool(isolation:_:)`` (or
/// the ``OffThePoolTrait``) those jobs block threads of their own instead.
///
/// A thread that finished its job waits a few seconds for the next one before it exits, so a
/// test that awaits in a loop reuses a handful of threads rather than making one per resumption.
/// The number of threads is not capped: a job that blocks never holds up another.
public final class OwnThreadExecutor: TaskExecutor, Sendable {
    /// The one instance: every test off the pool shares its idle threads.
    public static let shared = OwnThreadExecutor()

    /// How long an idle thread waits for a job before it exits.
    private static let idleLifetime: TimeInterval = 5

    private struct State {
        var jobs: [UnownedJob] = []
        var idleThreads = 0
    }

    /// Guards `state`; idle threads wait on it for a job.
    private let condition = NSCondition()
    private nonisolated(unsafe) var state = State()

    private init() {}

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if state.idleThreads > state.jobs.count {
            state.jobs.append(job)
            condition.signal()
            condition.unlock()
            return
        }
        condition.unlock()
        Thread.detachNewThread { [self] in work(first: job) }
    }

    /// Runs `first`, then whatever jobs come while the thread is idle for less than
    /// ``idleLifetime``.
    private func work(first: UnownedJob) {
        let executor = asUnownedTaskExecutor()
        var next: UnownedJob? = first
        while let job = next {
            job.runSynchronously(on: executor)
            next = nil
            condition.lock()
            state.idleThreads += 1
            let giveUpAt = Date(timeIntervalSinceNow: Self.idleLifetime)
            while state.jobs.isEmpty, condition.wait(until: giveUpAt) {}
            if !state.jobs.isEmpty { next = state.jobs.removeFirst() }
            state.idleThreads -= 1
            condition.unlock()
        }
    }
}

/// Runs `operation`, and every child task it starts, on threads of their own (an
/// ``OwnThreadExecutor``) instead of Swift's cooperative pool: for calls that block inside their
/// tasks, such as Swift Testing's exit tests.
public func offThePool<Value, Failure: Error>(
    isolation: isolated (any Actor)? = #isolation, _ operation: () async throws(Failure) -> Value
) async throws(Failure) -> Value {
    try await withTaskExecutorPreference(OwnThreadExecutor.shared, isolation: isolation, operation: operation)
}
