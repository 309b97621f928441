import Foundation
import ImgdTestSupport
import Synchronization
import Testing

@Suite("eventually: the test suite's poll with a deadline", .offThePool)
struct EventuallyTests {
    @Test("a condition that comes true is seen; one that never does is given up within twice the timeout")
    func deadline() async {
        let flag = Atomic<Bool>(false)
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.05)
            flag.store(true, ordering: .relaxed)
        }
        #expect(await eventually { flag.load(ordering: .relaxed) })

        // Giving up is bounded by polls, not by wall time (a starved pool stretches any one
        // pause): each poll but the last follows a 5 ms pause inside the deadline, which is at
        // most twice the timeout, so a never-true condition is asked at most 2 × 300 / 5 + 2 times.
        let clock = ContinuousClock()
        let start = clock.now
        let asked = Atomic<Int>(0)
        #expect(await eventually(timeout: .milliseconds(300)) { asked.add(1, ordering: .relaxed); return false } == false)
        #expect(clock.now - start >= .milliseconds(300))
        #expect(asked.load(ordering: .relaxed) <= 122, "asked \(asked.load(ordering: .relaxed)) times")
    }

    @Test("the async form: awaits its condition, counts a thrown error as not yet, keeps its interval")
    func asyncCondition() async {
        let asked = Atomic<Int>(0)
        let seen = await eventually(timeout: .seconds(30)) { () async throws -> Bool in
            await Task.yield()
            if asked.add(1, ordering: .relaxed).newValue < 3 { throw CancellationError() }
            return true
        }
        #expect(seen && asked.load(ordering: .relaxed) == 3)

        // 20 ms by default: a 300 ms poll asks at most 2 × 300 / 20 + 2 times.
        let never = Atomic<Int>(0)
        let start = ContinuousClock.now
        #expect(await eventually(timeout: .milliseconds(300)) { () async throws -> Bool in never.add(1, ordering: .relaxed); return false } == false)
        #expect(ContinuousClock.now - start >= .milliseconds(300))
        #expect(never.load(ordering: .relaxed) <= 32, "asked \(never.load(ordering: .relaxed)) times")
    }

    @Test("a cancelled poll gives up at once, after one last check, instead of spinning")
    func cancelled() async {
        let asked = Atomic<Int>(0)
        let task = Task {
            await eventually(timeout: .seconds(600)) { asked.add(1, ordering: .relaxed); return false }
        }
        #expect(await eventually { asked.load(ordering: .relaxed) > 0 })
        task.cancel()
        #expect(await task.value == false)
        let after = asked.load(ordering: .relaxed)
        try? await Task.sleep(for: .milliseconds(50))
        #expect(asked.load(ordering: .relaxed) == after, "still polling after its task was cancelled")
    }

    @Test("starvation moves the deadline: a pause late by more than 250 ms, up to the timeout again in all")
    func starvation() {
        let start = ContinuousClock.now
        var deadline = PollDeadline(timeout: .seconds(10), interval: .milliseconds(5), now: start)
        #expect(deadline.deadline == start + .seconds(10))
        deadline.paused(late: .milliseconds(200))  // ordinary scheduling: not counted
        #expect(deadline.deadline == start + .seconds(10) && deadline.granted == .zero)
        deadline.paused(late: .seconds(4))
        #expect(deadline.deadline == start + .seconds(14))
        #expect(!deadline.hasPassed(at: start + .seconds(12)))
        deadline.paused(late: .seconds(9))  // only 6 s of it are left to give
        #expect(deadline.deadline == start + .seconds(20) && deadline.granted == .seconds(10))
        deadline.paused(late: .seconds(5))
        #expect(deadline.deadline == start + .seconds(20))
        #expect(deadline.hasPassed(at: start + .seconds(20)))
    }

    @Test("eventuallyWhileProgressing: done is seen; a count that stops growing fails after the stall")
    func progressing() async {
        let count = Atomic<Int>(0)
        #expect(await eventuallyWhileProgressing(stall: .seconds(30), interval: .milliseconds(5)) {
            let now = count.add(1, ordering: .relaxed).newValue
            return (now, now >= 5)
        })
        let start = ContinuousClock.now
        #expect(await eventuallyWhileProgressing(stall: .milliseconds(200), interval: .milliseconds(5)) { (1, false) } == false)
        #expect(ContinuousClock.now - start >= .milliseconds(200))
    }
}
