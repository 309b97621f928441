import Synchronization

/// Durations counted into fixed buckets, for Prometheus histograms (`get` latency, transfer
/// duration). Recording takes no lock and allocates nothing: one relaxed atomic add for the
/// bucket and one for the sum, so any thread records (NIO event loops, the engine's thread)
/// without waiting on another. A ``snapshot()`` read while others record may see a sum a record
/// ahead of or behind its bucket: each number is exact, the pair is not one instant.
///
/// The bounds (``boundsNanoseconds``) are Prometheus' `le` values: 100 µs to 60 s, 18 of them,
/// plus the `+Inf` bucket.
public final class DurationHistogram: Sendable {
    /// Upper bounds of the finite buckets, in nanoseconds, ascending: 0.1, 0.25, 0.5, 1, 2.5, 5,
    /// 10, 25, 50, 100, 250, 500 ms, 1, 2.5, 5, 10, 30, 60 s.
    public static let boundsNanoseconds: InlineArray<18, UInt64> = [
        100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 50_000_000,
        100_000_000, 250_000_000, 500_000_000, 1_000_000_000, 2_500_000_000, 5_000_000_000, 10_000_000_000,
        30_000_000_000, 60_000_000_000,
    ]

    /// The bounds in seconds, as the exposition writes them.
    public static var boundsSeconds: [Double] {
        (0..<boundsNanoseconds.count).map { Double(boundsNanoseconds[$0]) / 1e9 }
    }

    /// Counts per bucket, not cumulative: `buckets[i]` holds durations in
    /// (`bounds[i-1]`, `bounds[i]`], the last one those over the last bound.
    private let buckets: InlineArray<19, Atomic<UInt64>>
    private let sum = Atomic<UInt64>(0)

    public init() {
        buckets = InlineArray { _ in Atomic(0) }
    }

    /// Counts one duration. The bucket is found by comparing against every bound (18
    /// comparisons, no branch taken on the data), cheaper here than a search's mispredictions.
    public func record(nanoseconds: UInt64) {
        var index = 0
        for bound in 0..<Self.boundsNanoseconds.count {
            index &+= nanoseconds > Self.boundsNanoseconds[bound] ? 1 : 0
        }
        buckets[index].add(1, ordering: .relaxed)
        sum.add(nanoseconds, ordering: .relaxed)
    }

    /// Counts one duration (negative ones as zero).
    public func record(_ duration: Duration) {
        guard duration > .zero else { return record(nanoseconds: 0) }
        let (seconds, attoseconds) = duration.components
        record(nanoseconds: UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000))
    }

    /// The counts now.
    public func snapshot() -> Snapshot {
        Snapshot(counts: (0..<19).map { buckets[$0].load(ordering: .relaxed) }, sumNanoseconds: sum.load(ordering: .relaxed))
    }

    /// A histogram's counts at one read.
    public struct Snapshot: Sendable, Hashable {
        /// Per bucket, not cumulative; one more than ``DurationHistogram/boundsNanoseconds``
        /// (the last is `+Inf`'s own).
        public var counts: [UInt64]
        public var sumNanoseconds: UInt64

        public var count: UInt64 { counts.reduce(0, &+) }
        public var sumSeconds: Double { Double(sumNanoseconds) / 1e9 }
    }
}
