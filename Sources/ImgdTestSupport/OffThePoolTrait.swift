import Testing

/// A trait that runs each test it applies to under ``offThePool(isolation:_:)``: the test's own
/// jobs, and those of the child tasks it starts, run on threads of their own instead of Swift's
/// cooperative pool.
///
/// Tests block and compute between their awaits: a cache opened or removed (256 fan-out folders
/// made or deleted, an `fsync`, a `syncfs` that waits for every dirty page of the filesystem),
/// lists written to disk, thousands of inputs parsed in a loop. The pool has one thread per core
/// (2 here), and a job on it is never preempted: stack samples of a full run found both threads
/// in such work most of the time, while every other test's next step, and the pollers behind
/// their deadlines, waited for one. On threads of their own, tests compete for the cores under
/// the kernel's scheduler, which takes turns, and the pool is left to the code under test.
///
/// Every suite carries it. Applied to a suite, it applies to every test in it.
public struct OffThePoolTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    /// A scope for each test case; none for a suite as a whole (its tests get theirs).
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await ImgdTestSupport.offThePool { try await function() }
    }
}

extension Trait where Self == OffThePoolTrait {
    /// Runs the test (each test of a suite) off Swift's cooperative pool: see ``OffThePoolTrait``.
    public static var offThePool: Self { Self() }
}
