import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@Suite("eventually: the test suite's poll with a deadline", .offThePool)
struct EventuallyTests {
    @Test("a condition that comes true is seen; one that never does is given up within twice the timeout")
    func deadline() async {
        let flag = Locked(false)
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.05)
            flag.withLock { $0 = true }
        }
        #expect(await eventually { flag.withLock { $0 } })

        // Giving up is bounded by polls, not by wall time (a starved pool stretches any one
        // pause): each poll but the last follows a 5 ms pause inside the deadline, which is at
        // most twice the timeout, so a never-true condition is asked at most 2 × 300 / 5 + 2 times.
        let clock = ContinuousClock()
        let start = clock.now
        let asked = Locked(0)
        #expect(await eventually(timeout: .milliseconds(300)) { asked.withLock { $0 += 1 }; return false } == false)
        #expect(clock.now - start >= .milliseconds(300))
        #expect(asked.withLock { $0 } <= 122, "asked \(asked.withLock { $0 }) times")
    }
}
