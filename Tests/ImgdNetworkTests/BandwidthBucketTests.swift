import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// `max-rate`'s token bucket and a transfer's held-back time, on a clock the tests move.
@Suite("max-rate: the token bucket and held-back time", .offThePool)
struct BandwidthBucketTests {
    let start = ContinuousClock.now

    @Test("no cap takes everything and never waits")
    func uncapped() {
        var bucket = BandwidthBucket(rate: nil, now: start)
        var refused = 0
        for _ in 0..<1000 where !bucket.take(1 << 20, now: start) { refused += 1 }
        #expect(refused == 0)
        let wait = bucket.waitForTokens(now: start)
        #expect(wait == .zero)
        var zero = BandwidthBucket(rate: 0, now: start)
        let taken = zero.take(1 << 30, now: start)
        #expect(zero.rate == nil && taken)
    }

    @Test("a full bucket holds a quarter of a second; one offer may leave it in debt, the next waits for the refill")
    func burstThenDebt() {
        var bucket = BandwidthBucket(rate: 40_000, now: start)
        #expect(bucket.tokens == 10_000)
        let large = bucket.take(16_384, now: start)
        #expect(large, "an offer larger than what is left is taken whole")
        #expect(bucket.tokens < 0)
        let inDebt = bucket.take(1, now: start)
        #expect(!inDebt, "in debt: refused")
        // 6,384 bytes of debt at 40,000 B/s: back above zero after 159.6 ms (plus a byte).
        let wait = bucket.waitForTokens(now: start)
        #expect(wait > .milliseconds(159) && wait < .milliseconds(161), "\(wait)")
        let early = bucket.take(1, now: start + .milliseconds(155))
        #expect(!early)
        let refilled = bucket.take(1, now: start + .milliseconds(161))
        #expect(refilled)
    }

    @Test("over a long run the bytes taken are the rate times the time, plus the burst and one offer")
    func exactOverTime() {
        let rate = 4_000_000
        var bucket = BandwidthBucket(rate: rate, now: start)
        var taken = 0
        // Eight transfers offering 16 KiB each, polled every millisecond for 5 s.
        for millisecond in 0..<5000 {
            let now = start + .milliseconds(millisecond)
            for _ in 0..<8 where bucket.take(16_384, now: now) { taken += 16_384 }
        }
        let ceiling = Double(rate) * 5 + BandwidthBucket.burst(of: rate) + 16_384
        #expect(Double(taken) <= ceiling, "\(taken) bytes in 5 s at \(rate) B/s")
        #expect(Double(taken) >= Double(rate) * 4.99, "\(taken) bytes in 5 s at \(rate) B/s: the cap held back more than it should")
    }

    @Test("a new rate applies at once: debt is kept, a higher cap refills faster, no cap takes everything, a cap again starts full")
    func reload() {
        var bucket = BandwidthBucket(rate: 10_000, now: start)
        var answers: [Bool] = []
        answers.append(bucket.take(50_000, now: start))
        answers.append(bucket.take(1, now: start + .seconds(1)))  // 37.5 KB of debt left at 10 KB/s
        bucket.setRate(1_000_000, now: start + .seconds(1))
        answers.append(bucket.take(1, now: start + .milliseconds(1040)))  // paid off 40 ms later at the new rate
        bucket.setRate(nil, now: start + .seconds(2))
        answers.append(bucket.take(100 << 20, now: start + .seconds(2)))
        #expect(answers == [true, false, true, true])
        bucket.setRate(2_000, now: start + .seconds(3))
        #expect(bucket.tokens == 500, "a cap set after none starts with a full bucket, not with a debt")
    }

    @Test("held-back time: counted across pauses, the current one included, and kept out of the run time")
    func heldBackTime() {
        var throttle = TransferThrottle()
        throttle.pause(now: start + .seconds(1))
        throttle.pause(now: start + .seconds(2))  // a second pause reason does not restart the clock
        #expect(throttle.heldBack(now: start + .seconds(3)) == .seconds(2))
        throttle.resume(now: start + .seconds(4))
        throttle.resume(now: start + .seconds(9))  // not paused: nothing added
        #expect(throttle.heldBack(now: start + .seconds(10)) == .seconds(3))
        #expect(throttle.runTime(startedAt: start, now: start + .seconds(10)) == .seconds(7))
    }

    @Test("a governed transfer: held back for longer than the timeout and the stall time, it has failed neither; receiving nothing while it may, it stalls")
    func governedLimits() {
        var throttle = TransferThrottle()
        throttle.isGoverned = true
        func judge(_ seconds: Int) -> String? {
            throttle.limitReached(
                startedAt: start, now: start + .seconds(seconds), timeout: .seconds(120), lowSpeedLimit: 1024,
                lowSpeedTime: .seconds(30))
        }
        throttle.took(40_000)
        #expect(judge(1) == nil)
        // Held back for 200 s: longer than the attempt's 120 s and the 30 s stall time.
        throttle.pause(now: start + .seconds(1))
        #expect(judge(150) == nil)
        throttle.resume(now: start + .seconds(201))
        #expect(judge(201) == nil)
        // Allowed to receive from then on, 31 s with nothing: a stall.
        #expect(judge(220) == nil)
        let stalled = judge(232)
        #expect(stalled?.contains("fewer than 1024 bytes/s") == true, "\(String(describing: stalled))")
    }

    @Test("a governed transfer still has the attempt's limit on the time it was allowed to receive")
    func governedTimeout() {
        var throttle = TransferThrottle()
        throttle.isGoverned = true
        throttle.pause(now: start)
        throttle.resume(now: start + .seconds(100))
        for second in stride(from: 100, through: 220, by: 10) {
            throttle.took(1 << 20)
            let verdict = throttle.limitReached(
                startedAt: start, now: start + .seconds(second), timeout: .seconds(120), lowSpeedLimit: 1024,
                lowSpeedTime: .seconds(30))
            #expect((verdict != nil) == (second > 220), "at \(second) s: \(String(describing: verdict))")
        }
        let over = throttle.limitReached(
            startedAt: start, now: start + .seconds(221), timeout: .seconds(120), lowSpeedLimit: 1024, lowSpeedTime: .seconds(30))
        #expect(over?.contains("more than 120 s") == true)
    }

    @Test("the pace rule leaves out time held back: a body that flows fast whenever allowed is not hopeless")
    func paceExcludesHeldBack() {
        // 1 MB declared, 100 KB in 10 s of which 9.9 s were held back: 1 MB/s while allowed.
        let now = start + .seconds(10)
        let withHeld = TransferPace.shortfall(
            received: 100_000, declared: 1_000_000, bodyStartedAt: start, startedAt: start, now: now,
            timeout: .seconds(20), heldBack: .milliseconds(9900))
        #expect(withHeld == nil)
        // The same figures without the held-back time: 10 KB/s, 90 s more with 10 s left.
        let without = TransferPace.shortfall(
            received: 100_000, declared: 1_000_000, bodyStartedAt: start, startedAt: start, now: now, timeout: .seconds(20))
        #expect(without != nil)
    }
}
