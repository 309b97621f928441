import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@Suite("eventually: the test suite's poll with a deadline")
struct EventuallyTests {
    @Test("a condition that comes true is seen; one that never does is given up within twice the timeout")
    func deadline() async {
        let flag = Locked(false)
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.05)
            flag.withLock { $0 = true }
        }
        #expect(await eventually { flag.withLock { $0 } })

        let clock = ContinuousClock()
        let start = clock.now
        #expect(await eventually(timeout: .milliseconds(300)) { false } == false)
        let waited = clock.now - start
        #expect(waited >= .milliseconds(300))
        #expect(waited < .seconds(5), "gave up after \(waited)")
    }
}
