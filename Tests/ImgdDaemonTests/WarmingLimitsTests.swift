import ImgdCore
@testable import ImgdDaemon
import Testing

/// The arithmetic that bounds the spool: the lists warmed at once and their windows, whatever
/// `max-active-lists`, `max-queued` and `max-queued-bytes` say, never hold more than the two
/// bounds, and every active list can always hold one URL.
@Suite("Warming limits: lists at once and their windows within max-queued")
struct WarmingLimitsTests {
    static func limits(lists: Int, queued: Int, bytes: Int) -> WarmingLimits {
        var limits = WarmingLimits()
        limits.maxActiveLists = lists
        limits.maxQueued = queued
        limits.maxQueuedBytes = bytes
        return limits
    }

    @Test("the defaults: 16 lists of 512 URLs, 4 MiB of URLs each (16 × 512 URLs of 8 KiB is max-queued-bytes)")
    func defaults() {
        let limits = WarmingLimits()
        #expect(limits.activeLists == 16 && limits.window == 512 && limits.windowBytes == 4 << 20)
    }

    @Test("for any settings, active lists × window ≤ max-queued, active lists × window bytes ≤ max-queued-bytes, and one URL of the longest kind fits a window", arguments: [
        (16, 100_000, 64 << 20), (2, 16, 8192 * 4), (16, 320, 64 << 20), (1000, 100_000, 64 << 20), (100_000, 10, 1 << 30),
        (16, 1, 8192), (50, 1000, 8192 * 20), (3, 7, 100_000),
    ])
    func bounded(lists: Int, queued: Int, bytes: Int) {
        let limits = Self.limits(lists: lists, queued: queued, bytes: bytes)
        #expect(limits.activeLists >= 1 && limits.activeLists <= lists)
        #expect(limits.activeLists * limits.window <= queued)
        #expect(limits.activeLists * limits.windowBytes <= bytes)
        #expect(limits.window >= 1 && limits.window <= WarmingLimits.fullWindow)
        #expect(limits.windowBytes >= ImageURL.maximumLength)
    }
}
