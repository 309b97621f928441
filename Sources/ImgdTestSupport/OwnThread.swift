import Foundation

/// Runs blocking `work` (a read, a connect, a wait for a process) on a thread of its own and
/// returns its result: on Swift's cooperative pool (2 threads here, shared by every test running
/// at once) it would hold a thread the other tests need; Dispatch's global queues are no better
/// on Linux.
public func onOwnThread<Value: Sendable>(_ work: @escaping @Sendable () -> Value) async -> Value {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}
