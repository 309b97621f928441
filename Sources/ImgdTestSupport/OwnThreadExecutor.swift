import Foundation

/// A task executor that runs each job it is given on a new thread of its own, never on Swift's
/// cooperative pool.
///
/// For code a test calls but does not own that blocks in its tasks: Swift Testing's exit tests
/// (`#expect(processExitsWith:)`) read the child's back channel and standard streams with
/// blocking reads in child tasks until the child exits, so on the pool (2 threads here, shared
/// by every test running at once) one exit test froze the whole run for as long as its child
/// ran. Under ``offThePool(isolation:_:)`` those child tasks inherit this executor and block threads of
/// their own instead. A thread per job is meant for the few jobs of such a call, not for hot
/// paths: use ``onOwnThread(_:)`` for plain blocking work.
public final class OwnThreadExecutor: TaskExecutor {
    /// The one instance: it has no state.
    public static let shared = OwnThreadExecutor()

    private init() {}

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        Thread.detachNewThread { job.runSynchronously(on: executor) }
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
