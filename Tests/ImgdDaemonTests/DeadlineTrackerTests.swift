@testable import ImgdDaemon
import Testing

/// A deadline's estimate on a clock driven by the test (one sample a second, as the spool takes
/// them): the rate over the last window, the finish it gives, at risk and back on track with a
/// margin, a stall, and the larger share kept until the deadline, not after.
@Suite("Deadlines: the estimate, at risk and on track, the boost")
struct DeadlineTrackerTests {
    /// Runs `seconds` one-second samples from `start`, settling `perSecond` URLs before each, out
    /// of `total`; the changes seen, by second.
    static func run(
        _ tracker: inout DeadlineTracker, from start: Int, seconds: Range<Int>, perSecond: Int, total: Int
    ) -> [(second: Int, change: DeadlineTracker.Change)] {
        var changes: [(Int, DeadlineTracker.Change)] = []
        for second in seconds {
            for _ in 0..<perSecond where tracker.settled < total { tracker.settle() }
            if let change = tracker.update(now: start + second * 1000, remaining: total - tracker.settled) { changes.append((second, change)) }
        }
        return changes
    }

    @Test("no estimate before 3 s; then the finish is now + remaining / rate, and a list that will make it is not at risk")
    func estimate() {
        var tracker = DeadlineTracker(readyBy: 100_000, remaining: 100)
        #expect(tracker.update(now: 0, remaining: 100) == nil)
        #expect(tracker.estimate.eta == nil && tracker.estimate.rate == nil && !tracker.estimate.atRisk)
        let changes = Self.run(&tracker, from: 0, seconds: 1..<5, perSecond: 5, total: 100)
        #expect(changes.isEmpty)
        // At 4 s: 20 settled over 4 s, 5 a second, 80 left: 16 s more.
        #expect(tracker.estimate.rate == 5)
        #expect(tracker.estimate.eta == 4_000 + 16_000)
        #expect(tracker.estimate.remaining == 80)
        #expect(tracker.weight(now: 4_000) == 1)
    }

    @Test("at risk as soon as the estimate passes the deadline (once); on track only with a margin; the boost stays until the deadline")
    func atRiskThenOnTrack() {
        // 200 URLs due in 30 s: at 5 a second they need 40 s.
        var tracker = DeadlineTracker(readyBy: 30_000, remaining: 200)
        _ = tracker.update(now: 0, remaining: 200)
        let slow = Self.run(&tracker, from: 0, seconds: 1..<6, perSecond: 5, total: 200)
        #expect(slow.map(\.second) == [3] && slow.map(\.change) == [.atRisk], "\(slow)")
        #expect(tracker.estimate.atRisk && tracker.weight(now: 5_000) == DeadlineTracker.boostWeight)
        // Faster (the larger share): 20 a second. Back on track once the estimate has room.
        let fast = Self.run(&tracker, from: 0, seconds: 6..<12, perSecond: 20, total: 200)
        #expect(fast.map(\.change) == [.onTrack], "\(fast)")
        #expect(!tracker.estimate.atRisk)
        // Recovered, it keeps the larger share (taking it back would put it at risk again).
        #expect(tracker.weight(now: 12_000) == DeadlineTracker.boostWeight)
        // After the deadline, an equal share whatever happens.
        #expect(tracker.weight(now: 30_000) == 1)
    }

    @Test("hovering just under the deadline sends no event: on track needs 10% of the time left (at least 2 s) to spare")
    func hysteresis() {
        // 100 URLs in 20 s at exactly 5 a second: finishes right at the deadline.
        var tracker = DeadlineTracker(readyBy: 20_000, remaining: 100)
        _ = tracker.update(now: 0, remaining: 100)
        let changes = Self.run(&tracker, from: 0, seconds: 1..<10, perSecond: 5, total: 100)
        #expect(changes.isEmpty, "\(changes)")
        // Pushed over by one slow second, then back at the old pace: at risk, and it stays so.
        var risky = DeadlineTracker(readyBy: 20_000, remaining: 100)
        _ = risky.update(now: 0, remaining: 100)
        var seen = Self.run(&risky, from: 0, seconds: 1..<4, perSecond: 5, total: 100)
        seen += Self.run(&risky, from: 0, seconds: 4..<5, perSecond: 1, total: 100)
        seen += Self.run(&risky, from: 0, seconds: 5..<12, perSecond: 5, total: 100)
        #expect(seen.map(\.change) == [.atRisk], "\(seen)")
    }

    @Test("nothing settling for 10% of the time left (at least 3 s) is a risk, with no estimate; a slow start a day early is not; a deadline passed with URLs left is a risk without the boost")
    func stalledAndLate() {
        // 20 s left: 10% is 2 s, so the 3 s floor applies.
        var stalled = DeadlineTracker(readyBy: 20_000, remaining: 10)
        _ = stalled.update(now: 0, remaining: 10)
        let changes = Self.run(&stalled, from: 0, seconds: 1..<4, perSecond: 0, total: 10)
        #expect(changes.map(\.second) == [3] && changes.map(\.change) == [.atRisk], "\(changes)")
        #expect(stalled.estimate.eta == nil && stalled.estimate.rate == 0)
        // A day left: a first transfer that takes a minute is no risk; silence for 2.4 h would be.
        var early = DeadlineTracker(readyBy: 86_400_000, remaining: 10)
        _ = early.update(now: 0, remaining: 10)
        #expect(Self.run(&early, from: 0, seconds: 1..<60, perSecond: 0, total: 10).isEmpty)
        #expect(early.update(now: 8_700_000, remaining: 10) == .atRisk)
        // A pause forgets the silence: the count starts again at the resume.
        var paused = DeadlineTracker(readyBy: 20_000, remaining: 10)
        _ = paused.update(now: 0, remaining: 10)
        _ = Self.run(&paused, from: 0, seconds: 1..<3, perSecond: 0, total: 10)
        paused.restartRate()
        #expect(Self.run(&paused, from: 0, seconds: 3..<5, perSecond: 0, total: 10).isEmpty)
        // Claimed after its deadline: at risk at once, but no larger share for it.
        var late = DeadlineTracker(readyBy: 1_000, remaining: 10)
        #expect(late.update(now: 5_000, remaining: 10) == .atRisk)
        #expect(late.weight(now: 5_000) == 1)
    }

    @Test("the rate looks at the last 30 s: an early burst of cached URLs does not hide a slow pace")
    func window() {
        var tracker = DeadlineTracker(readyBy: 1_000_000, remaining: 2_000)
        _ = tracker.update(now: 0, remaining: 2_000)
        _ = Self.run(&tracker, from: 0, seconds: 1..<2, perSecond: 1_000, total: 2_000)
        _ = Self.run(&tracker, from: 0, seconds: 2..<60, perSecond: 2, total: 2_000)
        let rate = tracker.estimate.rate ?? 0
        #expect(rate > 1.9 && rate < 2.1, "rate \(rate)")
    }

    @Test("a list whose URLs are all settled sends no event at its end")
    func settled() {
        var tracker = DeadlineTracker(readyBy: 10_000, remaining: 5)
        _ = tracker.update(now: 0, remaining: 5)
        let changes = Self.run(&tracker, from: 0, seconds: 1..<15, perSecond: 1, total: 5)
        #expect(changes.allSatisfy { $0.second <= 5 }, "\(changes)")
    }
}
