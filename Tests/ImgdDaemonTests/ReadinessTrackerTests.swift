@testable import ImgdDaemon
import Testing

/// ``ReadinessTracker``'s verdict: every list read, `ceil(fraction × total)` entries cached,
/// failures in the total, a refused list never ready, and the latch.
@Suite("Readiness tracker")
struct ReadinessTrackerTests {
    @Test("needed is ceil(fraction × total), without a rounding error's extra entry")
    func needed() {
        #expect(ReadinessTracker.needed(fraction: 0.9, total: 10) == 9)
        #expect(ReadinessTracker.needed(fraction: 0.95, total: 20) == 19)
        #expect(ReadinessTracker.needed(fraction: 0.7, total: 10) == 7)
        #expect(ReadinessTracker.needed(fraction: 0.5, total: 3) == 2)
        #expect(ReadinessTracker.needed(fraction: 1.0, total: 1_000_000) == 1_000_000)
        #expect(ReadinessTracker.needed(fraction: 0, total: 5) == 0)
    }

    @Test("no lists: ready at once")
    func noLists() {
        let tracker = ReadinessTracker(lists: [], fraction: 1)
        #expect(tracker.isReady && tracker.snapshot().ready && tracker.snapshot().missing.isEmpty)
    }

    @Test("not ready until the list is read to its end, then at the fraction; failures count against it; latched")
    func fractionAndLatch() {
        let tracker = ReadinessTracker(lists: ["/a", "/b"], fraction: 0.75)
        tracker.read(0, count: 2)
        for _ in 0..<2 { tracker.answered(0, cached: true) }
        tracker.finishedReading(0)
        // /b is still being read: all of /a cached is not enough.
        #expect(!tracker.isReady)
        #expect(tracker.snapshot().missing == ["/b: still being read (0 entries so far)"])
        tracker.read(1, count: 2)
        tracker.answered(1, cached: false)
        tracker.finishedReading(1)
        // 2 of 4 cached, 3 needed.
        #expect(!tracker.isReady)
        #expect(tracker.snapshot().missing == ["2 of 4 URLs cached (1 failed), 3 needed (ready-fraction 0.75)"])
        tracker.answered(1, cached: true)
        #expect(tracker.isReady && tracker.snapshot().lists.map(\.state) == [.done, .done])
        // Latched: a higher fraction does not take it back.
        tracker.update(fraction: 1)
        #expect(tracker.snapshot().ready)
    }

    @Test("a refused list: never ready, named; a lower fraction by reload makes it ready at once")
    func refusedAndReload() {
        let refused = ReadinessTracker(lists: ["/gone"], fraction: 0)
        refused.missing(0, reason: "no such file")
        #expect(!refused.isReady && refused.snapshot().missing == ["/gone: no such file"])

        let tracker = ReadinessTracker(lists: ["/a"], fraction: 1)
        tracker.read(0, count: 10)
        for index in 0..<10 { tracker.answered(0, cached: index < 9) }
        tracker.finishedReading(0)
        #expect(!tracker.isReady)
        tracker.update(fraction: 0.9)
        #expect(tracker.isReady)
    }
}
