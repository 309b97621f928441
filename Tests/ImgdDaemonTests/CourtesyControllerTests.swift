@testable import ImgdDaemon
import Testing

/// The courtesy loop's rule: halve over the threshold (held for 10 s), one more at a time
/// under it, never above the cap in force nor below 1, unchanged without a reading.
@Suite("Courtesy: additive increase, multiplicative decrease")
struct CourtesyControllerTests {
    @Test("over the threshold: halved, then held for the avg10 span; under it: +1 a reading up to the cap")
    func aimd() {
        let start = ContinuousClock.now
        var controller = CourtesyController(cap: 16)
        #expect(controller.step(share: 50, threshold: 20, cap: 16, now: start) == 8)
        #expect(controller.step(share: 50, threshold: 20, cap: 16, now: start + .seconds(2)) == 8)  // held
        #expect(controller.step(share: 50, threshold: 20, cap: 16, now: start + .seconds(10)) == 4)
        #expect(controller.step(share: 50, threshold: 20, cap: 16, now: start + .seconds(20)) == 2)
        #expect(controller.step(share: 50, threshold: 20, cap: 16, now: start + .seconds(30)) == 1)
        #expect(controller.step(share: 50, threshold: 20, cap: 16, now: start + .seconds(40)) == 1)  // never 0
        var limit = 1
        for second in stride(from: 42, through: 80, by: 2) {
            limit = controller.step(share: 20, threshold: 20, cap: 16, now: start + .seconds(second))  // at the threshold: not over
        }
        #expect(limit == 16)
        #expect(controller.step(share: 5, threshold: 20, cap: 16, now: start + .seconds(82)) == 16)
    }

    @Test("no reading leaves the cap; a lower max-parallel (a window) lowers it at once; reset restores it")
    func edges() {
        let start = ContinuousClock.now
        var controller = CourtesyController(cap: 8)
        #expect(controller.step(share: 90, threshold: 20, cap: 8, now: start) == 4)
        #expect(controller.step(share: nil, threshold: 20, cap: 8, now: start + .seconds(12)) == 4)
        #expect(controller.step(share: 1, threshold: 20, cap: 2, now: start + .seconds(14)) == 2)
        // Back at max-parallel (2) under the threshold: no longer lowered, it follows a raised one.
        #expect(controller.step(share: 1, threshold: 20, cap: 32, now: start + .seconds(16)) == 32)
        // Lowered again, a raised max-parallel is climbed to one at a time.
        #expect(controller.step(share: 50, threshold: 20, cap: 32, now: start + .seconds(18)) == 16)
        #expect(controller.step(share: 1, threshold: 20, cap: 64, now: start + .seconds(20)) == 17)
        // Not lowered: at max-parallel, it follows a raised one at once, with or without a reading.
        var calm = CourtesyController(cap: 8)
        #expect(calm.step(share: nil, threshold: 20, cap: 32, now: start) == 32)
        #expect(calm.step(share: 1, threshold: 20, cap: 4, now: start + .seconds(2)) == 4)
        #expect(calm.step(share: 1, threshold: 20, cap: 16, now: start + .seconds(4)) == 16)
        controller.reset(cap: 32)
        #expect(controller.limit == 32)
    }
}
