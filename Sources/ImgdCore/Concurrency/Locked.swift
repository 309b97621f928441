#if canImport(Glibc)
import Glibc
#endif

/// A value behind a lock: the one way imgd's types guard state shared between threads.
///
/// It is the standard library's `Mutex` with the same `withLock`, but built on a
/// `pthread_mutex_t`. The reason is proof, not speed: `Mutex` on Linux waits with bare futex
/// calls that ThreadSanitizer cannot see, so every access it guards is reported as a race
/// (Tests/Sanitizers/README.md shows a ten-line program doing that), and `make test-tsan` could
/// then prove nothing. ThreadSanitizer intercepts `pthread_mutex_lock`, so races reported
/// through this lock are real.
public final class Locked<Value>: @unchecked Sendable {
    // Unchecked: `value` is read and written only between lock and unlock of `mutex`, which
    // lives at a fixed address for the object's lifetime.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let created = pthread_mutex_init(mutex, nil)
        precondition(created == 0, "pthread_mutex_init failed: \(created)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock; `body` must not call back into
    /// this lock.
    @inline(__always)
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
