import ImgdCore
import ImgdTestSupport
@testable import ImgdDaemon
import Logging
import Testing

/// The tier's fallbacks in the log: a line for each new cause, then at most one a minute per
/// cause with how many there were, never a line per URL.
@Suite("Tier fallbacks in the log: once per cause, then once a minute", .offThePool)
struct TierFallbackLogTests {
    @Test("the first fallback of each cause is logged; repeats within a minute are counted, and told in the next minute's line")
    func oncePerCause() {
        let lines = Locked([String]())
        let log = TierFallbackLog(logger: .forwarding { text in lines.withLock { $0.append(text) } })
        let start = ContinuousClock.now
        let tier = "http://cache.site:8080"
        for second in 0..<30 { log.note(tier: tier, cause: "502 upstream", now: start + .seconds(second)) }
        log.note(tier: tier, cause: "no answer (connect)", now: start + .seconds(30))
        #expect(lines.withLock { $0 } == [
            "tier http://cache.site:8080: 502 upstream; fetching from the origin directly (tier-fallback; logged once a minute per cause)",
            "tier http://cache.site:8080: no answer (connect); fetching from the origin directly (tier-fallback; logged once a minute per cause)",
        ])
        log.note(tier: tier, cause: "502 upstream", now: start + .seconds(60))
        #expect(lines.withLock { $0.last } == "tier http://cache.site:8080: 502 upstream again, 30 times since the last message; fetching from the origin directly")
        log.note(tier: tier, cause: "502 upstream", now: start + .seconds(61))
        #expect(lines.withLock { $0.count } == 3)
    }

    @Test("a tier that varies its reason cannot grow the table past its bound")
    func boundedCauses() {
        let count = Locked(0)
        let log = TierFallbackLog(logger: .forwarding { _ in count.withLock { $0 += 1 } })
        for index in 0..<(TierFallbackLog.maxCauses * 3) { log.note(tier: "http://t", cause: "502 reason-\(index)") }
        // Each new reason is logged once (the table starts afresh past its bound), and no more.
        #expect(count.withLock { $0 } == TierFallbackLog.maxCauses * 3)
        #expect(log.causeCount <= TierFallbackLog.maxCauses)
    }
}
