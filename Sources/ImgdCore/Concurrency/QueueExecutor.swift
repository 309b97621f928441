import Dispatch

/// A serial executor that runs its jobs on one Dispatch queue: an actor whose work must stay off
/// the cooperative pool (SQLite, `unlink`, `fsync`, which block their thread) takes it as its
/// executor, and code that is not async (a C callback's thread) can still hand it work with
/// ``enqueue(_:)`` and run it isolated to that actor there (`assumeIsolated`, which
/// ``checkIsolated()`` makes safe on this queue).
///
/// (Linux's Dispatch has no `DispatchSerialQueue` executor; this is the same thing.)
public final class QueueExecutor: SerialExecutor {
    /// The queue every job runs on, one at a time.
    public let queue: DispatchQueue

    public init(label: String, qos: DispatchQoS = .unspecified) {
        queue = DispatchQueue(label: label, qos: qos)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }

    /// Runs `body` on the queue, after what was handed over before it.
    public func enqueue(_ body: @escaping @Sendable () -> Void) {
        queue.async(execute: body)
    }
}
